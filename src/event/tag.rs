//! Tag → [`TagClass`]: which kind of event a tag names, and the ids inside it.
//!
//! Tags seen on real masters (../shared/captures): `salt/job/<jid>/{new,publish}`,
//! `salt/job/<jid>/ret/<id>`, `salt/job/<jid>/prog/<id>/<n>`, `salt/run/<jid>/{new,ret,args}`,
//! `salt/batch/<jid>/{new,progress,complete,halted}` (3008.2+),
//! `salt/minion/<id>/start`, `minion_start`, `salt/auth`, `salt/key`, `key`,
//! `salt/presence/{present,change}`, `salt/beacon/<id>/<name>/...`, `minion/refresh/<id>`,
//! `resource/refresh/<id>`, and bare `<jid>` (3006/3007, data `{minions}`).

crate::label_set! {
    /// The closed set of event kinds; also a bounded metrics label.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum TagClass {
        JobNew = "job_new",
        JobPublish = "job_publish",
        JobReturn = "job_return",
        JobProgress = "job_progress",
        JobMinions = "job_minions",
        RunNew = "run_new",
        RunReturn = "run_return",
        RunArgs = "run_args",
        /// `salt/batch/<jid>/{new,progress,complete,halted}`: a `salt -b` run
        /// (3008.2+), its whole state in each.
        Batch = "batch",
        MinionStart = "minion_start",
        Auth = "auth",
        Key = "key",
        Presence = "presence",
        Beacon = "beacon",
        /// `saltsight/...`: fired by saltsight (`[reactor]`); the stages ignore it.
        Saltsight = "saltsight",
        Other = "other",
    }
}

/// What the tag alone tells: its class and the ids it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedTag<'a> {
    pub class: TagClass,
    pub jid: Option<&'a str>,
    pub minion: Option<&'a str>,
    /// `present` or `change` for presence; the beacon name for beacons.
    pub detail: Option<&'a str>,
}

impl<'a> ParsedTag<'a> {
    fn new(class: TagClass) -> Self {
        Self {
            class,
            jid: None,
            minion: None,
            detail: None,
        }
    }
}

/// Classifies a tag. Never fails: what is not recognised is [`TagClass::Other`].
pub fn parse(tag: &str) -> ParsedTag<'_> {
    let mut parts = Parts::new(tag, 6);
    let first = parts.next().unwrap_or_default();
    let second = parts.next();
    match (first, second) {
        ("salt", Some("job")) => parse_job(parts),
        ("salt", Some("run")) => {
            let jid = parts.next().filter(|j| !j.is_empty());
            let class = match (jid, parts.next(), parts.next()) {
                (Some(_), Some("new"), None) => TagClass::RunNew,
                (Some(_), Some("ret"), None) => TagClass::RunReturn,
                (Some(_), Some("args"), None) => TagClass::RunArgs,
                _ => TagClass::Other,
            };
            ParsedTag {
                jid: jid.filter(|_| class != TagClass::Other),
                ..ParsedTag::new(class)
            }
        }
        ("salt", Some("batch")) => match (parts.next(), parts.next(), parts.next()) {
            (Some(jid), Some(kind @ ("new" | "progress" | "complete" | "halted")), None)
                if !jid.is_empty() =>
            {
                ParsedTag {
                    jid: Some(jid),
                    detail: Some(kind),
                    ..ParsedTag::new(TagClass::Batch)
                }
            }
            _ => ParsedTag::new(TagClass::Other),
        },
        ("salt", Some("minion")) => match (parts.next(), parts.next(), parts.next()) {
            (Some(id), Some("start"), None) if !id.is_empty() => ParsedTag {
                minion: Some(id),
                ..ParsedTag::new(TagClass::MinionStart)
            },
            _ => ParsedTag::new(TagClass::Other),
        },
        ("salt", Some("auth")) if parts.next().is_none() => ParsedTag::new(TagClass::Auth),
        ("salt", Some("key")) if parts.next().is_none() => ParsedTag::new(TagClass::Key),
        ("salt", Some("presence")) => match (parts.next(), parts.next()) {
            (Some(kind @ ("present" | "change")), None) => ParsedTag {
                detail: Some(kind),
                ..ParsedTag::new(TagClass::Presence)
            },
            _ => ParsedTag::new(TagClass::Other),
        },
        ("salt", Some("beacon")) => match (parts.next(), parts.next()) {
            (Some(id), Some(name)) if !id.is_empty() && !name.is_empty() => ParsedTag {
                minion: Some(id),
                detail: Some(name),
                ..ParsedTag::new(TagClass::Beacon)
            },
            _ => ParsedTag::new(TagClass::Other),
        },
        ("minion_start", None) => ParsedTag::new(TagClass::MinionStart),
        ("saltsight", Some(_)) => ParsedTag::new(TagClass::Saltsight),
        (jid, None) if looks_like_jid(jid) => ParsedTag {
            jid: Some(jid),
            ..ParsedTag::new(TagClass::JobMinions)
        },
        _ => ParsedTag::new(TagClass::Other),
    }
}

/// `tag.splitn(limit, '/')` by a byte loop: a tag's parts are short, and
/// `splitn`'s searcher cost more than their bytes (about a thousand
/// instructions a tag, once per event).
struct Parts<'a> {
    rest: Option<&'a str>,
    /// Parts still to give: the last holds the rest of the tag.
    left: usize,
}

impl<'a> Parts<'a> {
    fn new(tag: &'a str, limit: usize) -> Self {
        Parts {
            rest: (limit > 0).then_some(tag),
            left: limit,
        }
    }
}

impl<'a> Iterator for Parts<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.rest?;
        self.left -= 1;
        let slash = if self.left == 0 {
            None
        } else {
            rest.bytes().position(|b| b == b'/')
        };
        match slash {
            Some(at) => {
                self.rest = Some(&rest[at + 1..]);
                Some(&rest[..at])
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
    }
}

fn parse_job<'a>(mut parts: Parts<'a>) -> ParsedTag<'a> {
    let Some(jid) = parts.next().filter(|j| !j.is_empty()) else {
        return ParsedTag::new(TagClass::Other);
    };
    let with_jid = |class| ParsedTag {
        jid: Some(jid),
        ..ParsedTag::new(class)
    };
    match (parts.next(), parts.next(), parts.next()) {
        (Some("new"), None, None) => with_jid(TagClass::JobNew),
        (Some("publish"), None, None) => with_jid(TagClass::JobPublish),
        (Some("ret"), Some(id), None) if !id.is_empty() => ParsedTag {
            minion: Some(id),
            ..with_jid(TagClass::JobReturn)
        },
        (Some("prog"), Some(id), Some(_n)) if !id.is_empty() => ParsedTag {
            minion: Some(id),
            ..with_jid(TagClass::JobProgress)
        },
        _ => ParsedTag::new(TagClass::Other),
    }
}

/// Salt's jids are 20 digits (`%Y%m%d%H%M%S%f`); older or custom ones may be
/// shorter, but a bare tag is only taken for a jid when it is all digits.
pub fn looks_like_jid(s: &str) -> bool {
    (14..=32).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_every_tag_shape_seen_on_real_masters() {
        let cases: &[(&str, TagClass, Option<&str>, Option<&str>)] = &[
            (
                "salt/job/20261121193259031759/new",
                TagClass::JobNew,
                Some("20261121193259031759"),
                None,
            ),
            (
                "salt/job/20261121193259031759/publish",
                TagClass::JobPublish,
                Some("20261121193259031759"),
                None,
            ),
            (
                "salt/job/20261121193259031759/ret/web2",
                TagClass::JobReturn,
                Some("20261121193259031759"),
                Some("web2"),
            ),
            (
                "salt/job/20261121194309318175/prog/web2/0",
                TagClass::JobProgress,
                Some("20261121194309318175"),
                Some("web2"),
            ),
            (
                "saltsight/job/20261121194540490471/missing",
                TagClass::Saltsight,
                None,
                None,
            ),
            (
                "saltsight/alert/DiskAlmostFull",
                TagClass::Saltsight,
                None,
                None,
            ),
            ("saltsight", TagClass::Other, None, None),
            (
                "20261121194540490471",
                TagClass::JobMinions,
                Some("20261121194540490471"),
                None,
            ),
            (
                "salt/run/20261121193642649081/new",
                TagClass::RunNew,
                Some("20261121193642649081"),
                None,
            ),
            (
                "salt/run/20261121193642649081/ret",
                TagClass::RunReturn,
                Some("20261121193642649081"),
                None,
            ),
            (
                "salt/run/20261121193642649081/args",
                TagClass::RunArgs,
                Some("20261121193642649081"),
                None,
            ),
            (
                "salt/minion/db1/start",
                TagClass::MinionStart,
                None,
                Some("db1"),
            ),
            ("minion_start", TagClass::MinionStart, None, None),
            ("salt/auth", TagClass::Auth, None, None),
            ("salt/key", TagClass::Key, None, None),
            ("key", TagClass::Other, None, None),
            ("salt/presence/present", TagClass::Presence, None, None),
            ("salt/presence/change", TagClass::Presence, None, None),
            (
                "salt/beacon/web1/inotify//etc/hosts",
                TagClass::Beacon,
                None,
                Some("web1"),
            ),
            (
                "salt/batch/20261207043319530601/progress",
                TagClass::Batch,
                Some("20261207043319530601"),
                None,
            ),
            (
                "salt/batch/20261207043319530601/complete",
                TagClass::Batch,
                Some("20261207043319530601"),
                None,
            ),
            (
                "salt/batch/20261207043319530601/stop",
                TagClass::Other,
                None,
                None,
            ),
            ("salt/batch//new", TagClass::Other, None, None),
            ("minion/refresh/web1", TagClass::Other, None, None),
            ("resource/refresh/db1", TagClass::Other, None, None),
            ("salt/job//new", TagClass::Other, None, None),
            ("salt/job/1/ret/", TagClass::Other, None, None),
            ("", TagClass::Other, None, None),
            ("12345", TagClass::Other, None, None),
        ];
        for (tag, class, jid, minion) in cases {
            let parsed = parse(tag);
            assert_eq!(
                (parsed.class, parsed.jid, parsed.minion),
                (*class, *jid, *minion),
                "tag {tag:?}"
            );
        }
    }

    proptest::proptest! {
        /// The byte loop splits as `str::splitn` does, whatever the slashes.
        #[test]
        fn parts_split_as_splitn(tag in "[a/é0]{0,12}", limit in 0usize..8) {
            let ours: Vec<&str> = Parts::new(&tag, limit).collect();
            let std: Vec<&str> = tag.splitn(limit, '/').collect();
            proptest::prop_assert_eq!(ours, std);
        }
    }
}
