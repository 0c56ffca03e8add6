//! The pull or merge request a commit came from, as its message names it:
//! GitHub's merge commit ("Merge pull request #12 from acme/branch"), a squash
//! merge's subject ("Fix nginx (#12)"), GitLab's merge commit body ("See merge
//! request acme/states!12"). Carried by `config_change` commits and `rollout`
//! records, so "from PR to edge" is one answer.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    /// GitLab's `group/project` (a merge request names its project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// From `correlate.pull_request_url`, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl PullRequest {
    /// `#12`, or GitLab's `acme/states!12`.
    pub fn label(&self) -> String {
        match &self.project {
            Some(project) => format!("{project}!{}", self.number),
            None => format!("#{}", self.number),
        }
    }

    /// Fills `url` from a template: `{number}`, `{project}` and `{repo}` (the
    /// watched tree's name) replaced.
    pub fn with_url(mut self, template: Option<&str>, repo: &str) -> Self {
        self.url = template.map(|t| {
            t.replace("{number}", &self.number.to_string())
                .replace("{project}", self.project.as_deref().unwrap_or(""))
                .replace("{repo}", repo)
        });
        self
    }
}

/// A number of at most 9 digits at the start of `text`.
fn number(text: &str) -> Option<u64> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty() && digits.len() <= 9)
        .then(|| digits.parse().ok())
        .flatten()
}

/// The request a commit's subject and body name, if any.
pub fn named_in(subject: &str, body: &str) -> Option<PullRequest> {
    let github = |number| PullRequest {
        number,
        project: None,
        url: None,
    };
    if let Some(rest) = subject.strip_prefix("Merge pull request #") {
        return number(rest).map(github);
    }
    for line in body.lines() {
        if let Some(reference) = line.trim().strip_prefix("See merge request ") {
            let (project, n) = reference.trim().rsplit_once('!')?;
            let plausible = !project.is_empty()
                && project
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
            return plausible
                .then(|| number(n))
                .flatten()
                .filter(|_| n.chars().all(|c| c.is_ascii_digit()))
                .map(|number| PullRequest {
                    number,
                    project: Some(project.to_owned()),
                    url: None,
                });
        }
    }
    let open = subject.trim_end().strip_suffix(')')?.rfind("(#")?;
    let inside = &subject.trim_end()[open + 2..subject.trim_end().len() - 1];
    inside
        .chars()
        .all(|c| c.is_ascii_digit())
        .then(|| number(inside))
        .flatten()
        .map(github)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(subject: &str, body: &str) -> Option<String> {
        named_in(subject, body).map(|p| p.label())
    }

    #[test]
    fn github_gitlab_and_squash_merges_name_their_request() {
        assert_eq!(
            n("Merge pull request #123 from acme/fix-nginx", ""),
            Some("#123".into())
        );
        assert_eq!(n("nginx: raise worker count (#45)", ""), Some("#45".into()));
        assert_eq!(
            n(
                "Merge branch 'fix' into 'main'",
                "Fix nginx\n\nSee merge request infra/salt-states!67\n"
            ),
            Some("infra/salt-states!67".into())
        );
        for (subject, body) in [
            ("web: plain commit", ""),
            ("see issue (#12a)", ""),
            ("Merge pull request #", ""),
            ("(#)", ""),
            ("x", "See merge request !5"),
            ("x", "See merge request a b!5"),
            ("mentions (#1) in the middle", ""),
            ("huge (#12345678901)", ""),
        ] {
            assert_eq!(n(subject, body), None, "{subject:?} {body:?}");
        }
    }

    #[test]
    fn a_url_template_names_the_request() {
        let pr = named_in("x (#7)", "").unwrap();
        let pr = pr.with_url(
            Some("https://github.com/acme/{repo}/pull/{number}"),
            "states",
        );
        assert_eq!(
            pr.url.as_deref(),
            Some("https://github.com/acme/states/pull/7")
        );
        assert_eq!(
            named_in("x (#7)", "").unwrap().with_url(None, "s").url,
            None
        );
    }
}
