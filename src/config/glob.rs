//! Shell-style globs (`*`, `?`), as Salt matches event tags with `fnmatch`.

/// Whether `text` matches `pattern`. `*` matches any run (also `/`), `?` one char.
pub fn matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn fnmatch_cases() {
        assert!(matches("salt/job/*/ret/*", "salt/job/1/ret/web1"));
        assert!(matches("*", ""));
        assert!(matches("state.*", "state.apply"));
        assert!(!matches("state.*", "test.ping"));
        assert!(matches("web?", "web1"));
        assert!(!matches("web?", "web10"));
        assert!(matches("*.conf", "10-a.conf"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
    }
}
