//! The ordered rule table: which category a failure's text says, and what it
//! names. Each row is grounded in the message as Salt (3006–3008) or the tool it
//! runs formats it; `rules/tests.rs` holds each row's messages.
//!
//! The order is the judgement: the first row that matches wins, so
//!
//! 1. Salt's own statements about the state tree come first (a state module that
//!    is not loaded, a file template that did not render, requisites);
//! 2. TLS and credentials next: their texts also carry words later rows take
//!    (pip ends a TLS failure with "Could not find a version", ssh's
//!    `Permission denied (publickey)` is not a file mode);
//! 3. DNS before connecting (a mirror that cannot be resolved is DNS, not "package
//!    not found"), connecting split by kind (refused, timed out, reset,
//!    unreachable: the kind is the failure's identity, the host its evidence);
//! 4. operations that started and did not finish (`timeout`), then local
//!    permissions;
//! 5. missing sources and packages only after every network row: pip, dnf and
//!    apt all end a network failure with their own "not found" words;
//! 6. services and commands last, then the exit codes of silent tools.
//!
//! TLS failures are `network.connect` (rule ids `tls_*`: the peer was reached,
//! its certificate or protocol refused) and credentials `permission` (ids
//! `auth_*`, `ssh_publickey`, `git_*`); an ssh host key that does not verify is
//! `network.connect` (`ssh_host_key`).

use crate::record::Category;

/// Which of a failure's texts a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The comment, stderr and stdout.
    Any,
    /// Only the state's comment: Salt's own phrases, which a command's output
    /// could otherwise echo.
    Comment,
}

/// What a rule's capture groups hold (the first group that took part is used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    Nothing,
    Host,
    Url,
    Package,
    /// Not in the text: the rule itself names the package (a missing `pip`).
    PackageIs(&'static str),
}

/// Whether the cause lies at a remote end or in what the state was given: its
/// host, URL and package are looked for beyond the rule's own captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    Remote,
    Local,
}

pub struct Rule {
    pub id: &'static str,
    pub category: Category,
    pub scope: Scope,
    pub names: Names,
    pub cause: Cause,
    pub pattern: &'static str,
}

macro_rules! rules {
    ($($id:literal: $category:ident, $scope:ident, $names:expr, $cause:ident, $pattern:literal;)*) => {
        &[$(Rule {
            id: $id,
            category: Category::$category,
            scope: Scope::$scope,
            names: $names,
            cause: Cause::$cause,
            pattern: $pattern,
        },)*]
    };
}

use Names::{Host, Nothing, Package, PackageIs, Url};

/// Ordered: the first match wins (see the module doc). `(?i)` where a tool's
/// wording varies in case between versions.
#[rustfmt::skip]
pub const RULES: &[Rule] = rules! {
    // Salt's own words about the state and the state tree.
    "state_not_found": StateUnavailable, Comment, Nothing, Local,
        r"^State '[^']+' was not found in SLS '[^']*'|^State '?[^'\s]+'? found in (?:SLS|sls) '?[^'\s]+'? is unavailable";
    "file_template": Render, Comment, Nothing, Local,
        r"^(?:Unable to manage file: |Recurse failed: )?(?:Jinja (?:variable|syntax error|error)\b|Undefined jinja variable|Problem running salt function in Jinja template)";
    "requisites_not_found": Render, Comment, Nothing, Local,
        r"^The following requisites were not found:";
    "recursive_requisite": Render, Comment, Nothing, Local,
        r"^(?:Recursive requisite found|Recursive require detected in SLS |A recursive requisite was found)";
    "top_no_match": Render, Comment, Nothing, Local,
        r"^No Top file or master_tops data matches found";

    // TLS: the peer was reached, its certificate or protocol was refused.
    "tls_name_mismatch": NetworkConnect, Any, Host, Remote,
        r"no alternative certificate subject name matches target host name '([^']+)'|hostname '([^']+)' doesn't match|x509: certificate is valid for [^\n]*?, not ([A-Za-z0-9.-]+)|certificate is not valid for '([^']+)'";
    "tls_wget_untrusted": NetworkConnect, Any, Host, Remote,
        r"ERROR: The certificate of ['‘]([^'’]+)['’] (?:is not trusted|doesn't have a known issuer|has expired|was signed using an insecure algorithm)|ERROR: cannot verify ([A-Za-z0-9.-]+)'s certificate";
    "tls_verify": NetworkConnect, Any, Nothing, Remote,
        r"(?i:certificate verify failed|SSL certificate problem|server certificate verification failed|SSL peer certificate or SSH remote key was not OK|x509: certificate|tls: failed to verify certificate|problem confirming the ssl certificate|The certificate was invalid|unable to get local issuer certificate)";
    "tls_protocol": NetworkConnect, Any, Nothing, Remote,
        r"(?i:wrong version number|(?:tlsv1|sslv3|ssl/tls) alert|alert handshake failure|SSL connect error|SSL_ERROR_SYSCALL|unsupported protocol|unknown protocol|no protocols available|tls: handshake failure|does not look like a TLS handshake|EOF occurred in violation of protocol|TLS handshake timeout|GnuTLS recv error|gnutls_handshake\(\) failed)|SSLError\(|SSL routines:";

    // Credentials and trust on the client's side.
    "ssh_host_key": NetworkConnect, Any, Host, Remote,
        r"Host key verification failed|host key is known for ([A-Za-z0-9.-]+) and you have requested strict checking|REMOTE HOST IDENTIFICATION HAS CHANGED";
    "ssh_publickey": Permission, Any, Host, Remote,
        r"(?:[A-Za-z0-9._-]+@([A-Za-z0-9.-]+): )?Permission denied \((?:publickey|password|keyboard-interactive|gssapi)[^)]*\)";
    "git_auth_failed": Permission, Any, Url, Remote,
        r"Authentication failed for '([^']+)'";
    "git_no_credentials": Permission, Any, Url, Remote,
        r"could not read (?:Username|Password) for '([^']+)'";
    "auth_registry": Permission, Any, Nothing, Remote,
        r"pull access denied for \S+|unauthorized: (?:authentication required|incorrect username or password)|denied: requested access to the resource is denied";
    "auth_http": Permission, Any, Nothing, Remote,
        r"HTTP (?:[Ee]rror )?40[13]\b|returned error: 40[13]\b|ERROR 40[13]\b|HTTP Basic: Access denied|\b40[13] (?:Unauthorized|Forbidden)\b";
    "auth_database": Permission, Any, Nothing, Remote,
        r#"password authentication failed for user|Access denied for user '[^']*'@|no pg_hba\.conf entry for host|FATAL:  role "[^"]+" does not exist"#;
    "git_identity_missing": SourceMissing, Comment, Nothing, Local,
        r"^[Ii]dentity '[^']+' does not exist";

    // Names that do not resolve.
    "apt_resolve": NetworkDns, Any, Host, Remote,
        r"(?:Temporary failure resolving|Could not resolve) '([^']+)'";
    "curl_resolve": NetworkDns, Any, Host, Remote,
        r"Could not resolve (?:host|proxy): ([A-Za-z0-9._-]+)|Couldn't resolve (?:host|proxy) '([A-Za-z0-9._-]+)'";
    "ssh_resolve": NetworkDns, Any, Host, Remote,
        r"Could not resolve hostname ([A-Za-z0-9._-]+):";
    "wget_resolve": NetworkDns, Any, Host, Remote,
        r"unable to resolve host address ['‘]([^'’]+)['’]";
    "go_lookup": NetworkDns, Any, Host, Remote,
        r"lookup ([A-Za-z0-9._-]+)(?: on [0-9A-Fa-f.:\[\]]+)?: (?:no such host|server misbehaving|i/o timeout|Temporary failure in name resolution|no answer from DNS server|read: connection refused)";
    "node_resolve": NetworkDns, Any, Host, Remote,
        r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN) ([A-Za-z0-9._-]+)";
    "java_resolve": NetworkDns, Any, Host, Remote,
        r"UnknownHostException: ([A-Za-z0-9._-]+)";
    "urllib3_resolve": NetworkDns, Any, Host, Remote,
        r"Failed to resolve '([^']+)'";
    "db_resolve": NetworkDns, Any, Host, Remote,
        r#"could not translate host name "([^"]+)" to address|Unknown MySQL server host '([^']+)'"#;
    "gpg_keyserver_resolve": NetworkDns, Any, Nothing, Remote,
        r"keyserver receive failed: No name";
    "getaddrinfo": NetworkDns, Any, Nothing, Remote,
        r"(?i:Name or service not known|Temporary failure in name resolution|nodename nor servname provided|Name does not resolve|No address associated with hostname|getaddrinfo failed|NXDOMAIN|Could not resolve host)|\[Errno -[235]\]";

    // Connecting: database clients name their server, then by kind.
    "connect_database": NetworkConnect, Any, Host, Remote,
        r#"Can't connect to MySQL server on '([^']+)'|Can't connect to local MySQL server through socket|Is the server running (?:locally and accepting|on that host|on host "([^"]+)")|could not connect to server: No such file or directory"#;
    "connect_timeout_dial": NetworkConnect, Any, Nothing, Remote,
        r"dial tcp [0-9A-Fa-f.:\[\]]+:\d+: (?:i/o timeout|connect: connection timed out)";
    "connect_refused": NetworkConnect, Any, Nothing, Remote,
        r"(?i:Connection refused|Couldn't connect to server|Could not connect to server|Curl error \(7\))|ECONNREFUSED|\[Errno 111\]|The connection to the server \S+ was refused|\[WinError 10061\]|actively refused it";
    "connect_timeout": NetworkConnect, Any, Nothing, Remote,
        r"(?i:Connection timed out|Timeout while connecting|Timeout was reached|Curl error \(28\)|connect timed out|request canceled while waiting for connection)|ETIMEDOUT|\[Errno 110\]|ConnectTimeout(?:Error)?\b|\(connect timeout=|\[WinError 10060\]";
    "connect_reset": NetworkConnect, Any, Nothing, Remote,
        r"(?i:Connection reset by peer|HTTP 599: Stream closed|HTTP 599: Connection closed|Curl error \(56\)|RemoteDisconnected|Connection closed by remote host|the remote end hung up unexpectedly|Empty reply from server)|ECONNRESET|\[Errno 104\]";
    "connect_unreachable": NetworkConnect, Any, Nothing, Remote,
        r"(?i:No route to host|Network is unreachable|Host is unreachable)|EHOSTUNREACH|ENETUNREACH|\[Errno (?:101|113)\]";
    "connect_endpoint": NetworkConnect, Any, Url, Remote,
        r#"Could not connect to the endpoint URL: "([^"]+)""#;
    "connect_other": NetworkConnect, Any, Nothing, Remote,
        r"Error code: Connection failed|Cannot connect to the Docker daemon|toomanyrequests|Failed to establish a new connection|Could not connect to [A-Za-z0-9._-]+:\d+";
    "http_5xx": NetworkConnect, Any, Nothing, Remote,
        r"HTTP (?:error )?50[0-4]\b|returned error: 50[0-4]\b|ERROR 50[0-4]\b|\b50[234] (?:Bad Gateway|Service Unavailable|Gateway Time-?out)\b";

    // Operations that started and did not finish.
    "salt_cmd_timeout": Timeout, Any, Nothing, Local,
        r" : Timed out after \d+ seconds";
    "systemd_job_timeout": Timeout, Any, Nothing, Local,
        r"Job for \S+ failed because a timeout was exceeded";
    "timeout": Timeout, Any, Nothing, Remote,
        r"(?i:Operation timed out|Timeout during request|Read timed out|a timeout was exceeded|timed out after|timeout expired|deadline exceeded|Timeout waiting|timed out waiting|Timeout exceeded|\btimed out\b)";

    // A missing pip reads "Access denied to <venv>": it does not exist.
    "pip_missing": DependencyPackage, Comment, PackageIs("pip"), Local,
        r"(?i)could not find a `?pip`? binary|No module named pip\b";
    "permission": Permission, Any, Nothing, Local,
        r"(?i:Permission denied|Operation not permitted|must be run as root|are you root\?|Access is denied|sudo: a password is required|Interactive authentication required)|\[Errno 13\]|EACCES";

    // Sources that are not there.
    "salt_source_missing": SourceMissing, Any, Url, Local,
        r"Source file (salt://[^\s']+) not found";
    "source_file_missing": SourceMissing, Any, Url, Local,
        r"Source file '([^']+)' (?:not found|does not exist)";
    "local_source_missing": SourceMissing, Any, Url, Local,
        r"Local file source (\S+) does not exist";
    "none_of_sources": SourceMissing, Any, Nothing, Local,
        r"none of the specified sources were found";
    "template_not_loaded": SourceMissing, Comment, Url, Local,
        r"^Failed to load template file (\S+)";
    "fileserver_dir_missing": SourceMissing, Comment, Nothing, Local,
        r"^The directory '[^']+' does not exist on the salt fileserver";
    "script_not_cached": SourceMissing, Any, Url, Local,
        r"Unable to cache script (\S+) from saltenv";
    "salt_file_not_cached": SourceMissing, Any, Url, Local,
        r"Failed to cache (salt://[^\s,]+)";
    "requirements_missing": SourceMissing, Any, Url, Local,
        r"requirements file '([^']+)' not found";
    "file_not_found": SourceMissing, Any, Url, Local,
        r"Error: file not found: (\S+)";
    "apt_fetch_404": DependencyPackage, Any, Url, Remote,
        r"Failed to fetch (\S+)\s+404\s+Not Found";
    "yum_repo_failed": DependencyPackage, Any, Nothing, Remote,
        r"\[Errno 14\] HTTP Error \d+|\[Errno 256\] No more mirrors to try|All mirrors were tried|Cannot retrieve metalink for repository";
    "http_404": SourceMissing, Any, Nothing, Remote,
        r"HTTP (?:[Ee]rror )?404\b|returned error: 404\b|ERROR 404\b";
    "git_repo_missing": SourceMissing, Any, Url, Remote,
        r"repository '([^']+)' (?:not found|does not exist)";
    "git_rev_missing": SourceMissing, Any, Nothing, Remote,
        r"^No revision matching '[^']+' exists|^Revision '[^']+' does not exist|Remote branch \S+ not found in upstream|couldn't find remote ref ";
    "image_missing": SourceMissing, Any, Nothing, Remote,
        r"manifest unknown|manifest for \S+ not found|No such image: \S+";

    // Packages: not in the repositories, repositories broken or locked.
    "apt_fetch_failed": DependencyPackage, Any, Url, Remote,
        r"Failed to fetch (\S+)|Unable to fetch some archives|Some index files failed to download";
    "apt_sources_invalid": DependencyPackage, Any, Nothing, Local,
        r"Conflicting values set for option \S+|Malformed entry \d+ in list file|The list of sources could not be read|Type '[^']*' is not known on line";
    "apt_no_package": DependencyPackage, Any, Package, Remote,
        r"Unable to locate package ([^\s,]+)";
    "apt_no_candidate": DependencyPackage, Any, Package, Remote,
        r"Package '?([^'\s]+)'? has no installation candidate";
    "apt_version_missing": DependencyPackage, Any, Package, Remote,
        r"Version '[^']+' for '([^']+)' was not found";
    "apt_broken": DependencyPackage, Any, Nothing, Local,
        r"Unable to correct problems, you have held broken packages|Sub-process /usr/bin/dpkg returned an error code|dpkg was interrupted|have unmet dependencies|dpkg: error processing|Errors were encountered while processing:";
    "apt_lock": DependencyPackage, Any, Nothing, Local,
        r"Could not get lock |Unable to acquire the dpkg frontend lock|Unable to lock the administration directory";
    "apt_unsigned": DependencyPackage, Any, Nothing, Remote,
        r"is not signed\.|NO_PUBKEY [0-9A-F]+|The following signatures couldn't be verified|The following signatures were invalid|EXPKEYSIG";
    "apt_no_release": DependencyPackage, Any, Url, Remote,
        r"The repository '([^' ]+)[^']*' does not have a Release file";
    "dnf_no_match": DependencyPackage, Any, Package, Remote,
        r"No match for argument:? ([^\s,]+)|Unable to find a match:? ([^\s,]+)";
    "yum_no_package": DependencyPackage, Any, Package, Remote,
        r"No package (?:u')?([^\s,']+)'? available";
    "rpm_nothing_provides": DependencyPackage, Any, Package, Remote,
        r"nothing provides ([^\s,]+)";
    "rpm_gpg": DependencyPackage, Any, Package, Remote,
        r"Public key for ([A-Za-z0-9_.+-]+?)-[0-9]\S*\.rpm is not installed|GPG check FAILED";
    "repo_metadata": DependencyPackage, Any, Nothing, Remote,
        r"Failed to download metadata for repo|Cannot find a valid baseurl for repo|Cannot retrieve repository metadata|Valid metadata not found at specified URL|Errors during downloading metadata for repository|Failed to synchronize cache for repo|Problem retrieving files from '";
    "zypper_no_package": DependencyPackage, Any, Package, Remote,
        r"Package '([^']+)' not found\.|No provider of '([^']+)' found";
    "pip_no_version": DependencyPackage, Any, Package, Remote,
        r"Could not find a version that satisfies the requirement ([A-Za-z0-9_.\[\]-]+)";
    "gem_missing": DependencyPackage, Any, Package, Remote,
        r"Could not find a valid gem '([^']+)'";
    "salt_pkg_failed": DependencyPackage, Comment, Package, Remote,
        r"The following (?:targeted )?packages?(?:\(s\))? failed to [a-z/]+(?:\. See debug log for details)?: \(?([A-Za-z0-9_.+:/@~=-]+)|Failed to install the following packages: ([A-Za-z0-9_.+:/@~=-]+)|^Package (\S+) failed to update|^\d+ targeted packages failed to update";
    "salt_pkg_no_match": DependencyPackage, Comment, Package, Remote,
        r"were not found, and no possible matches were found in the package db: ([^\s,]+)|Package '([^']+)' not found \(possible matches";
    "salt_pkg_no_info": DependencyPackage, Comment, Package, Remote,
        r"^No information found for '([^']+)'";
    "winrepo_not_found": DependencyPackage, Comment, Package, Remote,
        r"^Package (\S+) not found in the repository\.";
    "service_not_installed": DependencyPackage, Comment, Nothing, Local,
        r"^The named service \S+ is not available";
    "salt_pkg_error": DependencyPackage, Comment, Nothing, Remote,
        r"^(?:Problem encountered|Error occurred|An error was encountered while) (?:installing|removing|upgrading|downloading|updating|checking|refreshing)";
    "pkgrepo_failed": DependencyPackage, Comment, Nothing, Remote,
        r"^Failed to configure repo '";
    "salt_install_failed": DependencyPackage, Comment, Package, Remote,
        r"^(?:Failed to install packages: |Error installing ')([A-Za-z0-9_.\[\]-]+)|^Could not install gem\.";

    // Services and commands that ran and failed: Salt's own words first.
    "service_failed": Service, Comment, Nothing, Local,
        r"^(?:Service \S+ failed to (?:start|die)|Service \S+ (?:has been|is already) enabled, and is dead|Failed to reload the service|Failed when setting service \S+ to (?:not )?start at boot)";
    "systemd_job_failed": Service, Any, Nothing, Local,
        r"Job for \S+ failed|Unit \S+ not found\.|Failed to (?:start|restart|reload|stop|enable) \S+: ";
    "command_not_found": Command, Any, Nothing, Local,
        r"(?m)(?:line \d+: |: \d+: |^)[A-Za-z0-9_./-]+: (?:command )?not found$";
    "stateful_parse": Command, Comment, Nothing, Local,
        r"^Failed parsing script output!";
};

/// A silent download tool's exit code (`curl -s`, `wget -q` print nothing): read
/// only for a `cmd.*` state whose command is that tool, without a pipe (a
/// pipeline's status is its last command's).
pub struct ExitRule {
    pub tool: &'static str,
    pub codes: &'static [i64],
    pub id: &'static str,
    pub category: Category,
}

/// From curl's and wget's manuals (EXIT CODES / EXIT STATUS). curl 22 and wget 8
/// (any HTTP error) stay `command`: 404 and 500 alike.
#[rustfmt::skip]
pub const EXIT_RULES: &[ExitRule] = &[
    ExitRule { tool: "curl", codes: &[5, 6], id: "curl_exit_resolve", category: Category::NetworkDns },
    ExitRule { tool: "curl", codes: &[7, 52, 56], id: "curl_exit_connect", category: Category::NetworkConnect },
    ExitRule { tool: "curl", codes: &[28], id: "curl_exit_timeout", category: Category::Timeout },
    ExitRule { tool: "curl", codes: &[35, 51, 60, 77], id: "curl_exit_tls", category: Category::NetworkConnect },
    ExitRule { tool: "curl", codes: &[67], id: "curl_exit_login", category: Category::Permission },
    ExitRule { tool: "wget", codes: &[4], id: "wget_exit_network", category: Category::NetworkConnect },
    ExitRule { tool: "wget", codes: &[5], id: "wget_exit_tls", category: Category::NetworkConnect },
    ExitRule { tool: "wget", codes: &[6], id: "wget_exit_login", category: Category::Permission },
];

#[cfg(test)]
mod tests;
