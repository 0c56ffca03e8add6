//! Each rule on the messages it is for, as Salt or the tool formats them (hosts
//! and names invented): at least two per rule, from different tools, versions
//! or states where they differ. Through [`classify`], so the order is tested
//! too: a message that an earlier rule takes fails here.

use super::*;
use crate::triage::category::{FailureText, classify};

/// One message: where it is (the comment, or a `cmd.run`'s stderr or stdout),
/// the rule that must take it and what it must name.
struct Case {
    comment: &'static str,
    stderr: Option<&'static str>,
    stdout: Option<&'static str>,
    rule: &'static str,
    host: Option<&'static str>,
    url: Option<&'static str>,
    package: Option<&'static str>,
}

const fn c(comment: &'static str, rule: &'static str) -> Case {
    Case {
        comment,
        stderr: None,
        stdout: None,
        rule,
        host: None,
        url: None,
        package: None,
    }
}

/// A `cmd.run` whose command wrote `stderr`.
const fn e(stderr: &'static str, rule: &'static str) -> Case {
    Case {
        stderr: Some(stderr),
        ..c("Command \"./run.sh\" run", rule)
    }
}

impl Case {
    const fn host(mut self, host: &'static str) -> Self {
        self.host = Some(host);
        self
    }
    const fn url(mut self, url: &'static str) -> Self {
        self.url = Some(url);
        self
    }
    const fn package(mut self, package: &'static str) -> Self {
        self.package = Some(package);
        self
    }
    const fn stdout(mut self, stdout: &'static str) -> Self {
        self.stdout = Some(stdout);
        self
    }
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    // Salt's own words.
    c("State 'file.manged' was not found in SLS 'web.nginx'\nReason: 'file.manged' is not available.\n", "state_not_found"),
    c("State 'lvm.lv_present' was not found in SLS 'storage.lvm'\nReason: 'lvm' __virtual__ returned False: lvm command not found\n", "state_not_found"),
    c("State apache_module.enable found in sls apache.sls is unavailable", "state_not_found"),
    c("Unable to manage file: Jinja variable 'port' is undefined; line 2\n\n---\nlisten {{ port }};    <======================\n---", "file_template"),
    c("Unable to manage file: Jinja syntax error: expected token 'end of statement block', got 'workers'; line 5", "file_template"),
    c("Unable to manage file: Problem running salt function in Jinja template: Unable to get pillar value for key 'x'; line 3", "file_template"),
    c("Unable to manage file: Undefined jinja variable; line 5", "file_template"),
    c("The following requisites were not found:\n                   require:\n                       pkg: nginx\n", "requisites_not_found"),
    c("The following requisites were not found:\n                   watch:\n                       file: /etc/app.conf\n", "requisites_not_found"),
    c("Recursive requisite found", "recursive_requisite"),
    c("Recursive require detected in SLS app.order", "recursive_requisite"),
    c("No Top file or master_tops data matches found. Please see master log for details.", "top_no_match"),
    c("No Top file or master_tops data matches found.", "top_no_match"),
    // TLS.
    e("curl: (60) SSL: no alternative certificate subject name matches target host name 'api.example.net'", "tls_name_mismatch").host("api.example.net"),
    c("Unable to manage file: hostname 'pki.example.net' doesn't match either of '*.example.com', 'example.com'", "tls_name_mismatch").host("pki.example.net"),
    e("Unable to connect to the server: tls: failed to verify certificate: x509: certificate is valid for kubernetes, k8s.internal, not k8s.example.net", "tls_name_mismatch").host("k8s.example.net"),
    c("Unable to manage file: Failed to cache https://files.example.net/ca.pem: Error: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: Hostname mismatch, certificate is not valid for 'files.example.net'. (_ssl.c:1006) reading /ca.pem", "tls_name_mismatch").host("files.example.net").url("https://files.example.net/ca.pem"),
    e("ERROR: The certificate of 'repo.example.net' is not trusted.\nERROR: The certificate of 'repo.example.net' doesn't have a known issuer.", "tls_wget_untrusted").host("repo.example.net"),
    e("ERROR: cannot verify repo.example.net's certificate, issued by 'CN=Example CA':", "tls_wget_untrusted").host("repo.example.net"),
    c("Unable to manage file: Failed to cache https://git.example.net/raw/haproxy.cfg: Error: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate (_ssl.c:1006) reading /raw/haproxy.cfg", "tls_verify").host("git.example.net").url("https://git.example.net/raw/haproxy.cfg"),
    e("curl: (60) SSL certificate problem: unable to get local issuer certificate\nMore details here: https://curl.se/docs/sslcerts.html", "tls_verify"),
    c("Failed to check remote refs: fatal: unable to access 'https://git.example.net/o/r.git/': server certificate verification failed. CAfile: /etc/ssl/certs/ca-certificates.crt CRLfile: none", "tls_verify").host("git.example.net").url("https://git.example.net/o/r.git/"),
    e("Error checking seal status: Get \"https://vault.example.net:8200/v1/sys/seal-status\": tls: failed to verify certificate: x509: certificate signed by unknown authority", "tls_verify").host("vault.example.net").url("https://vault.example.net:8200/v1/sys/seal-status"),
    c("Unable to manage file: Failed to cache https://10.0.8.21:8080/app.ini: Error: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006) reading /app.ini", "tls_protocol").host("10.0.8.21"),
    e("curl: (35) OpenSSL/3.0.13: error:0A000410:SSL routines::sslv3 alert handshake failure", "tls_protocol"),
    e("curl: (35) OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to github.com:443", "tls_protocol"),
    e("fatal: unable to access 'https://git.example.net/o/r.git/': gnutls_handshake() failed: The TLS connection was non-properly terminated.", "tls_protocol").url("https://git.example.net/o/r.git/"),
    // Credentials and trust.
    c("Failed to check remote refs: Host key verification failed.\nfatal: Could not read from remote repository.", "ssh_host_key"),
    c("Failed to check remote refs: No ED25519 host key is known for github.com and you have requested strict checking.\nHost key verification failed.", "ssh_host_key").host("github.com"),
    c("Failed to check remote refs: git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.", "ssh_publickey").host("github.com"),
    e("deploy@10.1.2.3: Permission denied (publickey,password).", "ssh_publickey").host("10.1.2.3"),
    c("Failed to check remote refs: remote: HTTP Basic: Access denied\nfatal: Authentication failed for 'https://gitlab.example.net/ops/private.git/'", "git_auth_failed").host("gitlab.example.net").url("https://gitlab.example.net/ops/private.git/"),
    e("fatal: Authentication failed for 'https://git.example.net/team/app.git/'", "git_auth_failed").url("https://git.example.net/team/app.git/"),
    c("Failed to check remote refs: fatal: could not read Username for 'https://gitlab.example.net': No such device or address", "git_no_credentials").host("gitlab.example.net").url("https://gitlab.example.net"),
    e("fatal: could not read Password for 'https://deploy@git.example.net': terminal prompts disabled", "git_no_credentials").host("git.example.net"),
    c("Encountered error pulling acme/worker:2.0: Error 404: pull access denied for acme/worker, repository does not exist or may require 'docker login': denied: requested access to the resource is denied", "auth_registry"),
    e("Error response from daemon: Head \"https://registry.example.net/v2/app/manifests/1\": unauthorized: authentication required", "auth_registry").host("registry.example.net"),
    c("Unable to manage file: Failed to cache https://nexus.example.net/releases/app.jar: Error: HTTP 401: Unauthorized reading /releases/app.jar", "auth_http").host("nexus.example.net").url("https://nexus.example.net/releases/app.jar"),
    e("curl: (22) The requested URL returned error: 403", "auth_http"),
    e("failure: repodata/repomd.xml from corp: [Errno 256] No more mirrors to try.\nhttps://yum.example.net/el7/repodata/repomd.xml: [Errno 14] HTTP Error 401 - Unauthorized", "auth_http").host("yum.example.net"),
    c("Failed to create database app: psql: error: connection to server at \"db.example.net\" (10.0.0.9), port 5432 failed: FATAL:  password authentication failed for user \"app\"", "auth_database"),
    c("MySQL Error 1045: Access denied for user 'root'@'localhost' (using password: YES)", "auth_database"),
    e("FATAL:  no pg_hba.conf entry for host \"10.0.0.7\", user \"app\", database \"app\", SSL off", "auth_database"),
    c("identity '/root/.ssh/deploy_ed25519' does not exist.", "git_identity_missing"),
    c("Identity '/root/.ssh/deploy_ed25519' does not exist.", "git_identity_missing"),
    // DNS.
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Failed to fetch http://deb.example.org/pool/n/nginx.deb  Temporary failure resolving 'deb.example.org'", "apt_resolve").host("deb.example.org").url("http://deb.example.org/pool/n/nginx.deb"),
    e("W: Failed to fetch http://mirror.example.net/dists/jammy/InRelease  Could not resolve 'mirror.example.net'", "apt_resolve").host("mirror.example.net"),
    e("curl: (6) Could not resolve host: packages.example.com", "curl_resolve").host("packages.example.com"),
    e("curl: (6) Couldn't resolve host 'repo.example.org'", "curl_resolve").host("repo.example.org"),
    e("curl: (5) Could not resolve proxy: proxy.example.net", "curl_resolve").host("proxy.example.net"),
    c("Failed to check remote refs: ssh: Could not resolve hostname gitlab.example.net: Name or service not known", "ssh_resolve").host("gitlab.example.net"),
    e("ssh: Could not resolve hostname backup.example.net: Temporary failure in name resolution", "ssh_resolve").host("backup.example.net"),
    e("wget: unable to resolve host address 'dl.example.com'", "wget_resolve").host("dl.example.com"),
    e("wget: unable to resolve host address ‘dl.example.com’", "wget_resolve").host("dl.example.com"),
    e("Error enabling: Put \"https://vault.service.consul:8200/v1/sys/mounts/app\": dial tcp: lookup vault.service.consul on 127.0.0.53:53: no such host", "go_lookup").host("vault.service.consul").url("https://vault.service.consul:8200/v1/sys/mounts/app"),
    e("Error: Get \"https://charts.example.net/index.yaml\": dial tcp: lookup charts.example.net: no such host", "go_lookup").host("charts.example.net"),
    e("dial tcp: lookup registry.example.net on 10.0.0.2:53: server misbehaving", "go_lookup").host("registry.example.net"),
    e("npm ERR! network request to https://registry.example.org/express failed, reason: getaddrinfo ENOTFOUND registry.example.org", "node_resolve").host("registry.example.org").url("https://registry.example.org/express"),
    e("Error: getaddrinfo EAI_AGAIN npm.example.net", "node_resolve").host("npm.example.net"),
    e("Unexpected error running Liquibase: java.net.UnknownHostException: db.example.net", "java_resolve").host("db.example.net"),
    e("Caused by: java.net.UnknownHostException: nexus.example.net: Name or service not known", "java_resolve").host("nexus.example.net"),
    e("(Caused by NameResolutionError(\"HTTPSConnection(host='vault.example.net', port=443): Failed to resolve 'vault.example.net' ([Errno -2] Name or service not known)\"))", "urllib3_resolve").host("vault.example.net"),
    e("Failed to resolve 'pypi.example.net' ([Errno -3] Temporary failure in name resolution)", "urllib3_resolve").host("pypi.example.net"),
    e("psql: error: could not translate host name \"db.example.net\" to address: Name or service not known", "db_resolve").host("db.example.net"),
    e("ERROR 2005 (HY000): Unknown MySQL server host 'db.example.net' (-2)", "db_resolve").host("db.example.net"),
    c("Failed to configure repo 'deb http://ppa.example.net/ubuntu jammy main': Error: key retrieval failed: gpg: keyserver receive failed: No name", "gpg_keyserver_resolve").host("ppa.example.net"),
    e("gpg: keyserver receive failed: No name", "gpg_keyserver_resolve"),
    c("Unable to manage file: Error: [Errno -3] Temporary failure in name resolution reading /consul/1.17.0/SHA256SUMS", "getaddrinfo"),
    c("Unable to manage file: Failed to cache https://artifacts.example.com/app.tgz: Error: [Errno -2] Name or service not known reading /app.tgz", "getaddrinfo").host("artifacts.example.com").url("https://artifacts.example.com/app.tgz"),
    c("Unable to manage file: <urlopen error [Errno 11001] getaddrinfo failed>", "getaddrinfo"),
    // Connecting.
    e("error validating data: failed to download openapi: Get \"https://10.96.0.1:443/openapi/v2\": dial tcp 10.96.0.1:443: i/o timeout", "connect_timeout_dial").host("10.96.0.1"),
    e("dial tcp 10.0.0.7:5432: connect: connection timed out", "connect_timeout_dial").host("10.0.0.7"),
    c("Unable to manage file: Failed to cache http://10.40.2.17:8081/app.tgz: Error: [Errno 111] Connection refused reading /app.tgz", "connect_refused").host("10.40.2.17").url("http://10.40.2.17:8081/app.tgz"),
    e("curl: (7) Failed to connect to 127.0.0.1 port 8500 after 0 ms: Couldn't connect to server", "connect_refused").host("127.0.0.1"),
    e("curl: (7) Failed to connect to vault.example.net:8200 after 66 ms: Could not connect to server", "connect_refused").host("vault.example.net"),
    e("Error: connect ECONNREFUSED 127.0.0.1:5432\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)", "connect_refused").host("127.0.0.1"),
    e("The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?", "connect_refused").host("10.0.0.1"),
    c("Unable to manage file: <urlopen error [WinError 10061] No connection could be made because the target machine actively refused it>", "connect_refused"),
    c("Failed to check remote refs: ssh: connect to host bitbucket.org port 22: Connection timed out", "connect_timeout").host("bitbucket.org"),
    c("Unable to manage file: Failed to cache http://files.example.net/a.tgz: Error: HTTP 599: Timeout while connecting reading /a.tgz", "connect_timeout").host("files.example.net"),
    c("Failed to install packages: requests. Error: WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ConnectTimeoutError(<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f2>, 'Connection to pypi.example.org timed out. (connect timeout=15)')': /simple/requests/", "connect_timeout"),
    e("requests.exceptions.ConnectTimeout: HTTPSConnectionPool(host='api.example.net', port=443): Max retries exceeded with url: /v1 (Caused by ConnectTimeoutError(<urllib3.connection.HTTPSConnection object at 0x7f3>, 'Connection to api.example.net timed out. (connect timeout=5)'))", "connect_timeout").host("api.example.net"),
    c("Unable to manage file: <urlopen error [WinError 10060] A connection attempt failed because the connected party did not properly respond after a period of time>", "connect_timeout"),
    c("Unable to manage file: Failed to cache http://files.example.net/a.tgz: Error: [Errno 104] Connection reset by peer reading /a.tgz", "connect_reset").host("files.example.net"),
    c("Unable to manage file: Failed to cache https://media.example.org/a.tar: Error: HTTP 599: Stream closed reading /a.tar", "connect_reset").host("media.example.org"),
    e("curl: (52) Empty reply from server", "connect_reset"),
    c("Unable to manage file: Failed to cache http://10.20.30.40/a.tgz: Error: [Errno 101] Network is unreachable reading /a.tgz", "connect_unreachable").host("10.20.30.40"),
    e("ssh: connect to host 10.1.2.3 port 22: No route to host", "connect_unreachable").host("10.1.2.3"),
    e("kex_exchange_identification: read: Connection reset by peer\r\nConnection reset by 10.1.1.1 port 22", "connect_reset").host("10.1.1.1"),
    e("upload failed: ./db.tgz to s3://bucket/db.tgz Could not connect to the endpoint URL: \"https://s3.eu-west-1.example.com/bucket/db.tgz\"", "connect_endpoint").host("s3.eu-west-1.example.com").url("https://s3.eu-west-1.example.com/bucket/db.tgz"),
    e("Could not connect to the endpoint URL: \"https://sts.example.com/\"", "connect_endpoint").host("sts.example.com"),
    c("MySQL Error 2003: Can't connect to MySQL server on '10.0.0.5' (111)", "connect_database").host("10.0.0.5"),
    c("MySQL Error 2002: Can't connect to local MySQL server through socket '/var/run/mysqld/mysqld.sock' (2)", "connect_database"),
    c("Failed to create user app: psql: error: connection to server on socket \"/var/run/postgresql/.s.PGSQL.5432\" failed: No such file or directory\n\tIs the server running locally and accepting connections on that socket?", "connect_database"),
    e("psql: could not connect to server: No such file or directory\n\tIs the server running locally and accepting\n\tconnections on Unix domain socket \"/tmp/.s.PGSQL.5432\"?", "connect_database"),
    e("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", "connect_other"),
    c("Encountered error pulling redis:7.2: Error 500: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit", "connect_other"),
    c("Unable to manage file: Failed to cache https://nexus.example.net/raw/agent: Error: HTTP 503: Service Unavailable reading /raw/agent", "http_5xx").host("nexus.example.net"),
    e("curl: (22) The requested URL returned error: 502", "http_5xx"),
    // Operations that did not finish.
    c("Command \"/opt/app/bin/warm-cache --all\" run", "salt_cmd_timeout").stdout("/opt/app/bin/warm-cache --all : Timed out after 300 seconds"),
    c("Command \"sleep 100\" run", "salt_cmd_timeout").stdout("sleep 100 : Timed out after 5 seconds"),
    c("Job for postgresql@16-main.service failed because a timeout was exceeded.\nSee \"systemctl status postgresql@16-main.service\" for details.", "systemd_job_timeout"),
    e("Job for app.service failed because a timeout was exceeded.", "systemd_job_timeout"),
    e("curl: (28) Operation timed out after 30002 milliseconds with 0 bytes received", "timeout"),
    c("Unable to manage file: Failed to cache https://media.example.org/a.tar: Error: HTTP 599: Timeout during request reading /a.tar", "timeout").host("media.example.org"),
    e("requests.exceptions.ReadTimeout: HTTPConnectionPool(host='app.example.net', port=8080): Read timed out. (read timeout=2)", "timeout").host("app.example.net"),
    // Local permissions; a pip that is not there.
    c("Error installing 'gunicorn==21.2.0': Access denied to /opt/venvs/app, could not find a pip binary", "pip_missing").package("pip"),
    c("Error installing 'prometheus-client': Could not find a `pip` binary", "pip_missing").package("pip"),
    c("Error installing 'flask': /srv/venv/bin/python3: No module named pip", "pip_missing").package("pip"),
    e("mkdir: cannot create directory '/opt/app': Permission denied", "permission"),
    c("Failed to start app.service: Interactive authentication required.\nSee system logs and 'systemctl status app.service' for details.", "permission"),
    c("Failed to commit change: [Errno 13] Permission denied: '/etc/hostnameilk3jnpe'", "permission"),
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)\n      E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?", "permission"),
    // Sources.
    c("Unable to manage file: Source file salt://nginx/files/nginx.conf not found in saltenv 'base'", "salt_source_missing").url("salt://nginx/files/nginx.conf"),
    c("Source file salt://files/motd.tmpl not found", "salt_source_missing").url("salt://files/motd.tmpl"),
    c("Source file '/srv/archives/app-3.2.tgz' does not exist", "source_file_missing").url("/srv/archives/app-3.2.tgz"),
    c("Unable to manage file: Source file '/srv/files/a.conf' not found", "source_file_missing").url("/srv/files/a.conf"),
    c("Unable to manage file: Local file source /srv/deploy/app/config.yml does not exist", "local_source_missing").url("/srv/deploy/app/config.yml"),
    c("Unable to manage file: Local file source /opt/artifacts/app-1.4.2.tar.gz does not exist", "local_source_missing").url("/opt/artifacts/app-1.4.2.tar.gz"),
    c("Unable to manage file: none of the specified sources were found", "none_of_sources"),
    c("Recurse failed: none of the specified sources were found", "none_of_sources"),
    c("Failed to load template file salt://nginx/nginx.conf.j2", "template_not_loaded").url("salt://nginx/nginx.conf.j2"),
    c("Failed to load template file salt://app/settings.py.jinja", "template_not_loaded").url("salt://app/settings.py.jinja"),
    c("The directory 'app/static' does not exist on the salt fileserver in saltenv 'base'", "fileserver_dir_missing"),
    c("The directory 'nginx/sites' does not exist on the salt fileserver in saltenv 'prod'", "fileserver_dir_missing"),
    c("Unable to cache script salt://scripts/bootstrap-node.sh from saltenv 'base'", "script_not_cached").url("salt://scripts/bootstrap-node.sh"),
    c("Unable to cache script salt://scripts/migrate.py from saltenv 'prod'", "script_not_cached").url("salt://scripts/migrate.py"),
    c("Failed to cache salt://app/files/app-3.2.tar.gz, check minion log for more information", "salt_file_not_cached").url("salt://app/files/app-3.2.tar.gz"),
    c("Unable to manage file: Failed to cache salt://app/files/big.iso: [Errno 28] No space left on device", "salt_file_not_cached").url("salt://app/files/big.iso"),
    c("Unable to process requirements file \"salt://app/requirements.txt\" Error: pip requirements file 'salt://app/requirements.txt' not found", "requirements_missing").url("salt://app/requirements.txt"),
    c("Unable to process requirements file \"/srv/app/requirements.txt\" Error: pip requirements file '/srv/app/requirements.txt' not found", "requirements_missing").url("/srv/app/requirements.txt"),
    c("Failed to configure repo 'deb [signed-by=/etc/apt/keyrings/salt.gpg] https://packages.example.com/salt stable main': Error: file not found: salt://salt/files/SALT-PUBKEY.gpg", "file_not_found").url("salt://salt/files/SALT-PUBKEY.gpg"),
    c("Error: file not found: salt://keys/repo.asc", "file_not_found").url("salt://keys/repo.asc"),
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Failed to fetch http://archive.example.net/ubuntu/pool/main/o/openssl/libssl3_3.0.2-0ubuntu1.10_amd64.deb  404  Not Found [IP: 185.125.190.36 80]", "apt_fetch_404").host("archive.example.net").package("libssl3"),
    e("E: Failed to fetch http://deb.example.org/pool/main/n/nginx/nginx-common_1.22.1-9_all.deb  404  Not Found", "apt_fetch_404").package("nginx-common"),
    c("Unable to manage file: Failed to cache https://code.example.com/zips/highcharts.txt: Error: HTTP 404: Not Found reading /zips/highcharts.txt", "http_404").host("code.example.com").url("https://code.example.com/zips/highcharts.txt"),
    e("HTTP request sent, awaiting response... 404 Not Found\n2024-05-21 10:00:10 ERROR 404: Not Found.", "http_404"),
    e("curl: (22) The requested URL returned error: 404", "http_404"),
    c("Error occurred installing package(s). Additional info follows:\n\nerrors:\n    - https://yum.example.net/el7/repodata/repomd.xml: [Errno 14] HTTP Error 404 - Not Found\n      Trying other mirror.", "yum_repo_failed").host("yum.example.net"),
    e("failure: repodata/repomd.xml from corp: [Errno 256] No more mirrors to try.", "yum_repo_failed"),
    e("Error: Cannot retrieve metalink for repository: epel/x86_64. Please verify its path and try again", "yum_repo_failed"),
    c("Failed to check remote refs: fatal: repository 'https://git.example.net/ops/deploy.git/' not found", "git_repo_missing").host("git.example.net").url("https://git.example.net/ops/deploy.git/"),
    e("fatal: repository '/srv/git/app.git' does not exist", "git_repo_missing").url("/srv/git/app.git"),
    c("No revision matching 'v2.14.0' exists in the remote repository", "git_rev_missing"),
    c("Revision 'release-9' does not exist in clone", "git_rev_missing"),
    c("Clone failed: fatal: Remote branch release-9 not found in upstream origin", "git_rev_missing"),
    c("Encountered error pulling registry.example.net/api:1.8.2: Error 404: manifest for registry.example.net/api:1.8.2 not found: manifest unknown: manifest unknown", "image_missing").host("registry.example.net"),
    e("Error response from daemon: manifest for registry.example.net/api:1.8.2 not found: manifest unknown: manifest unknown", "image_missing").host("registry.example.net"),
    c("Encountered error inspecting image 'acme/api:9': Error 404: No such image: acme/api:9", "image_missing"),
    // Packages.
    c("An error was encountered while installing package(s): E: Failed to fetch https://download.example.com/dists/jammy/stable/binary-amd64/Packages.bz2  Hash Sum mismatch", "apt_fetch_failed").host("download.example.com").url("https://download.example.com/dists/jammy/stable/binary-amd64/Packages.bz2"),
    e("E: Failed to fetch http://mirror.example.net/pool/a.deb  Undetermined Error", "apt_fetch_failed").url("http://mirror.example.net/pool/a.deb"),
    e("E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?", "apt_fetch_failed"),
    c("An error was encountered while installing package(s): E: Conflicting values set for option Signed-By regarding source https://apt.example.com/ stable: /etc/apt/keyrings/a.gpg != ", "apt_sources_invalid"),
    e("E: Malformed entry 1 in list file /etc/apt/sources.list.d/corp.list (Component)\nE: The list of sources could not be read.", "apt_sources_invalid"),
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Unable to locate package prometheus-node-exporter", "apt_no_package").package("prometheus-node-exporter"),
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - Running scope as unit: run-rc8533b50f0d0810f74cbe2ace0069032.scope\n      E: Unable to locate package checkinstall", "apt_no_package").package("checkinstall"),
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Package 'mysql-server' has no installation candidate", "apt_no_candidate").package("mysql-server"),
    e("E: Package 'php7.4-fpm' has no installation candidate", "apt_no_candidate").package("php7.4-fpm"),
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Version '2.4.57-2' for 'apache2' was not found", "apt_version_missing").package("apache2"),
    e("E: Version '1.22.0-1' for 'nginx' was not found", "apt_version_missing").package("nginx"),
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Unable to correct problems, you have held broken packages.", "apt_broken"),
    e("E: Sub-process /usr/bin/dpkg returned an error code (1)", "apt_broken"),
    e("dpkg: error processing package nginx-core (--configure):\n installed nginx-core package post-installation script subprocess returned error exit status 1\nErrors were encountered while processing:\n nginx-core", "apt_broken"),
    c("Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 24441 (unattended-upgr)", "apt_lock"),
    e("E: Could not get lock /var/lib/dpkg/lock - open (11: Resource temporarily unavailable)\nE: Unable to lock the administration directory (/var/lib/dpkg/), is another process using it?", "apt_lock"),
    c("An error was encountered while installing package(s): W: GPG error: https://apt.example.com stable InRelease: The following signatures couldn't be verified because the public key is not available: NO_PUBKEY 963FA27710458545", "apt_unsigned").host("apt.example.com"),
    e("E: The repository 'https://apt.example.com stable InRelease' is not signed.", "apt_unsigned"),
    c("Failed to configure repo 'deb http://ppa.example.net/php/ubuntu focal main': E: The repository 'http://ppa.example.net/php/ubuntu focal Release' does not have a Release file.", "apt_no_release").host("ppa.example.net").url("http://ppa.example.net/php/ubuntu"),
    e("E: The repository 'http://ppa.example.net/ubuntu jammy Release' does not have a Release file.", "apt_no_release").url("http://ppa.example.net/ubuntu"),
    c("Error occurred installing package(s). Additional info follows:\n\nerrors:\n    - Last metadata expiration check: 0:19:01 ago on Fri Jun 23 22:41:43 2023.\n      No match for argument: salt-minion\n      Error: Unable to find a match: salt-minion", "dnf_no_match").package("salt-minion"),
    e("Error: Unable to find a match: python3-boto", "dnf_no_match").package("python3-boto"),
    c("Error occurred installing package(s). Additional info follows:\n\nerrors:\n    - Loaded plugins: fastestmirror\n      No package cronie available.\n      Error: Nothing to do", "yum_no_package").package("cronie"),
    e("No package u'cronie' available.", "yum_no_package").package("cronie"),
    c("An error was encountered while installing package(s): Zypper command failure: Problem: nothing provides my-requires-package needed by testpackage-1.0.noarch", "rpm_nothing_provides").package("my-requires-package"),
    e(" Problem: conflicting requests\n  - nothing provides java-17-openjdk-headless needed by app-2.0.noarch", "rpm_nothing_provides").package("java-17-openjdk-headless"),
    e("Public key for postgresql16-server-16.1-1PGDG.rhel9.x86_64.rpm is not installed", "rpm_gpg").package("postgresql16-server"),
    e("Error: GPG check FAILED", "rpm_gpg"),
    e("Error: Failed to download metadata for repo 'epel': Cannot download repomd.xml", "repo_metadata"),
    e("One of the configured repositories failed (Unknown),\nCannot find a valid baseurl for repo: base/7/x86_64", "repo_metadata"),
    c("An error was encountered while installing package(s): Zypper command failure: Package 'salt-master' not found.", "zypper_no_package").package("salt-master"),
    e("No provider of 'nginx-extras' found.", "zypper_no_package").package("nginx-extras"),
    c("Failed to install packages: saltlab-lib==2.1.0. Error: Looking in indexes: https://pypi.example.net/simple/ ERROR: Could not find a version that satisfies the requirement saltlab-lib==2.1.0 (from versions: 1.9.0)", "pip_no_version").package("saltlab-lib").host("pypi.example.net"),
    e("ERROR: Could not find a version that satisfies the requirement celery[redis]>=9 (from versions: none)", "pip_no_version").package("celery"),
    e("ERROR:  Could not find a valid gem 'fpm-cookery' (>= 0) in any repository", "gem_missing").package("fpm-cookery"),
    e("ERROR:  Could not find a valid gem 'bundlr' (= 2.4.1), here is why:", "gem_missing").package("bundlr"),
    c("The following packages failed to install/update: jq", "salt_pkg_failed").package("jq"),
    c("The following packages failed to install/update: salt-minion=3006.9\nThe following packages were already installed: salt-common=3006.9", "salt_pkg_failed").package("salt-minion"),
    c("The following packages failed to install/update: host\n84 targeted packages were already installed", "salt_pkg_failed").package("host"),
    c("Package nginx failed to update.", "salt_pkg_failed").package("nginx"),
    c("The following targeted packages failed to update. See debug log for details: (nginx, openssl).", "salt_pkg_failed").package("nginx"),
    c("The following package(s) were not found, and no possible matches were found in the package db: app-misc/screenfetch", "salt_pkg_no_match").package("app-misc/screenfetch"),
    c("Package 'vim' not found (possible matches: app-editors/vim, app-vim/vim-core)", "salt_pkg_no_match").package("vim"),
    c("No information found for 'datadog-agent'.", "salt_pkg_no_info").package("datadog-agent"),
    c("No information found for 'nginx-extras'.", "salt_pkg_no_info").package("nginx-extras"),
    c("Package firefox not found in the repository.", "winrepo_not_found").package("firefox"),
    c("Package 7zip not found in the repository.", "winrepo_not_found").package("7zip"),
    c("The named service node_exporter is not available", "service_not_installed"),
    c("The named service ntpd is not available", "service_not_installed"),
    c("Error occurred installing package(s). Additional info follows:\n\nerrors:", "salt_pkg_error"),
    c("An error was encountered while checking the newest available version of package(s): boom", "salt_pkg_error"),
    c("Failed to configure repo 'deb http://repo.example.net/ubuntu jammy main': Something unexpected", "pkgrepo_failed").host("repo.example.net").url("http://repo.example.net/ubuntu"),
    c("Failed to configure repo 'corp': unknown", "pkgrepo_failed"),
    c("Failed to install packages: requests==2.31.0. Error: exit status 2", "salt_install_failed").package("requests"),
    c("Error installing 'gunicorn==21.2.0': something else", "salt_install_failed").package("gunicorn"),
    c("Could not install gem.", "salt_install_failed"),
    // Services and commands.
    c("Service restorecond failed to start", "service_failed"),
    c("Service app-worker has been enabled, and is dead", "service_failed"),
    c("Failed when setting service app-worker to start at boot, but the service is running. Additional information follows:\n\nFailed to enable unit: Unit file app-worker.service is masked.", "service_failed"),
    c("Job for nginx.service failed because the control process exited with error code.\nSee \"systemctl status nginx.service\" and \"journalctl -xeu nginx.service\" for details.", "systemd_job_failed"),
    e("Failed to restart node_exporter.service: Unit node_exporter.service not found.", "systemd_job_failed"),
    e("/bin/bash: line 1: terraform: command not found", "command_not_found"),
    e("sh: 1: terraform: not found", "command_not_found"),
    c("Failed parsing script output! Stdout must be JSON or a line of name=value pairs.", "stateful_parse"),
    c("Failed parsing script output! Stdout must be JSON or a line of name=value pairs.\n", "stateful_parse"),
];

#[test]
fn every_case_is_taken_by_its_rule_and_names_what_it_names() {
    let mut wrong = Vec::new();
    for case in CASES {
        let is_command = case.stderr.is_some() || case.stdout.is_some();
        let found = classify(&FailureText {
            function: if is_command { "cmd.run" } else { "test.fail" },
            comment: case.comment,
            stderr: case.stderr,
            stdout: case.stdout,
            exit_code: is_command.then_some(1),
        });
        let rule = RULES.iter().find(|r| r.id == case.rule).expect("a rule");
        let named = [
            ("host", case.host, found.host.as_deref()),
            ("url", case.url, found.url.as_deref()),
            ("package", case.package, found.package.as_deref()),
        ];
        if found.rule != case.rule || found.category != rule.category {
            wrong.push(format!(
                "{:?}: {} ({}), want {}",
                case.stderr.unwrap_or(case.comment),
                found.rule,
                found.category.as_str(),
                case.rule
            ));
        }
        for (field, want, got) in named {
            if want.is_some() && want != got {
                wrong.push(format!("{}: {field} {got:?}, want {want:?}", case.rule));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_rule_has_two_messages_at_least() {
    for rule in RULES {
        let n = CASES.iter().filter(|c| c.rule == rule.id).count();
        assert!(n >= 2, "{} has {n} messages", rule.id);
    }
}

#[test]
fn a_local_cause_names_no_remote_end() {
    // A permission problem on a command that fetched a URL: the URL is not why.
    let found = classify(&FailureText {
        function: "cmd.run",
        comment: "Command \"curl -o /opt/x https://dl.example.net/x\" run",
        stderr: Some("curl: (23) Failure writing output to destination: Permission denied"),
        stdout: None,
        exit_code: Some(23),
    });
    assert_eq!(
        (found.rule.as_ref(), found.host, found.url),
        ("permission", None, None)
    );
}
