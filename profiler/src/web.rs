//! `profiler serve --web-config FILE`: TLS and basic auth in the format of Prometheus's
//! exporter-toolkit (`tls_server_config` with `cert_file` and `key_file`; `basic_auth_users`,
//! user → bcrypt hash), so a fleet's exporters share one way of being secured, and
//! `--user NAME`: root is dropped once the programs are attached and the maps open.
//!
//! Only what is implemented is accepted: any other key of the toolkit's format (client
//! certificates, cipher suites, HTTP headers) is refused in one line rather than ignored.

use std::{
    collections::{BTreeMap, HashSet},
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use anyhow::{Context as _, Result, bail};
use base64::Engine as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
}

/// A loaded `--web-config`.
pub struct WebConfig {
    tls: Option<Arc<rustls::ServerConfig>>,
    /// user → bcrypt hash.
    users: BTreeMap<String, String>,
    /// (user, password) pairs verified once: bcrypt is slow on purpose, a scrape every few
    /// seconds should not pay it each time (as exporter-toolkit caches).
    verified: Mutex<HashSet<(String, String)>>,
}

impl WebConfig {
    /// Reads `path` and the files it names (relative to its directory).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--web-config {}: cannot read it", path.display()))?;
        let file: File = serde_yaml_ng::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "--web-config {}: {e} (supported: tls_server_config with cert_file and key_file, basic_auth_users)",
                path.display()
            )
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = match file.tls_server_config {
            Some(t) => Some(Arc::new(tls_config(
                &dir.join(&t.cert_file),
                &dir.join(&t.key_file),
            )?)),
            None => None,
        };
        let users = file.basic_auth_users.unwrap_or_default();
        for (user, hash) in &users {
            if !hash.starts_with("$2") {
                bail!(
                    "--web-config {}: the password of {user} is not a bcrypt hash (make one with `htpasswd -nBC 10 {user}`)",
                    path.display()
                );
            }
        }
        if tls.is_none() && users.is_empty() {
            bail!(
                "--web-config {}: neither tls_server_config nor basic_auth_users: it would secure nothing",
                path.display()
            );
        }
        Ok(Self {
            tls,
            users,
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// Whether connections are TLS.
    #[must_use]
    pub fn has_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether requests need a user and password.
    #[must_use]
    pub fn has_auth(&self) -> bool {
        !self.users.is_empty()
    }

    /// Wraps an accepted connection (the TLS handshake happens on first read or write).
    pub fn wrap(&self, stream: TcpStream) -> Result<Conn> {
        Ok(match &self.tls {
            Some(config) => Conn::Tls(Box::new(rustls::StreamOwned::new(
                rustls::ServerConnection::new(Arc::clone(config))
                    .context("starting a TLS session")?,
                stream,
            ))),
            None => Conn::Plain(stream),
        })
    }

    /// Whether a request with this `Authorization` header may read the metrics.
    pub fn authorized(&self, authorization: Option<&str>) -> bool {
        if self.users.is_empty() {
            return true;
        }
        let Some(encoded) = authorization.and_then(|a| a.trim().strip_prefix("Basic ")) else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Some((user, password)) = String::from_utf8_lossy(&decoded)
            .split_once(':')
            .map(|(u, p)| (u.to_owned(), p.to_owned()))
        else {
            return false;
        };
        let key = (user, password);
        let mut verified = self
            .verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if verified.contains(&key) {
            return true;
        }
        let ok = self
            .users
            .get(&key.0)
            .is_some_and(|hash| bcrypt::verify(&key.1, hash).unwrap_or(false));
        if ok {
            verified.insert(key);
        }
        ok
    }
}

#[expect(
    deprecated,
    reason = "ring's provider: aws-lc-rs needs cmake to build; a metrics endpoint needs no post-quantum key exchange"
)]
fn tls_config(cert: &Path, key: &Path) -> Result<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cert_file {}: cannot read it", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cert_file {}: not PEM certificates", cert.display()))?;
    if certs.is_empty() {
        bail!("cert_file {}: no certificate in it", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("key_file {}: no PEM private key in it", key.display()))?;
    rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the certificate and the key do not make a TLS configuration (do they match?)")
}

/// A served connection: plain TCP or TLS over it.
pub enum Conn {
    /// Plain HTTP.
    Plain(TcpStream),
    /// HTTPS.
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Conn {
    /// The TCP connection under it (for timeouts).
    #[must_use]
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => &s.sock,
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

/// `--user NAME`: become `name` (its uid, its primary group, no supplementary groups) and keep
/// no capability. Called once the programs are attached and every map is open: reading maps
/// through open descriptors needs no privilege.
pub fn drop_root(name: &str) -> Result<()> {
    let c_name = std::ffi::CString::new(name).context("--user: a NUL in the name")?;
    // SAFETY: getpwnam returns a pointer into static storage or null; read at once.
    let (uid, gid) = unsafe {
        let pw = libc::getpwnam(c_name.as_ptr());
        if pw.is_null() {
            bail!("--user {name}: no such user");
        }
        ((*pw).pw_uid, (*pw).pw_gid)
    };
    if uid == 0 {
        bail!("--user {name} is root: give an unprivileged user (e.g. nobody)");
    }
    // SAFETY: plain syscalls on this process; the order drops groups before the uid.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            bail!(
                "--user {name}: dropping root failed: {}",
                std::io::Error::last_os_error()
            );
        }
        // Never back: a process that could regain root has not dropped it.
        if libc::setuid(0) == 0 {
            bail!("--user {name}: root could be regained after dropping it");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_with_unknown_keys_or_plain_passwords_is_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        for (text, expected) in [
            ("basic_auth_users:\n  alice: secret\n", "not a bcrypt hash"),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
                "client_ca_file",
            ),
            ("http_server_config:\n  http2: true\n", "http_server_config"),
            ("{}\n", "it would secure nothing"),
            (
                "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n",
                "missing.crt",
            ),
        ] {
            let path = dir.path().join("web.yml");
            std::fs::write(&path, text).unwrap();
            let e = format!("{:#}", WebConfig::load(&path).err().expect(text));
            assert!(e.contains(expected), "{text}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn basic_auth_accepts_the_right_password_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("web.yml");
        let hash = bcrypt::hash("secret", 4).unwrap();
        std::fs::write(&path, format!("basic_auth_users:\n  alice: '{hash}'\n")).unwrap();
        let web = WebConfig::load(&path).unwrap();
        let header = |user: &str, password: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        };
        assert!(web.authorized(Some(&header("alice", "secret"))));
        assert!(web.authorized(Some(&header("alice", "secret"))), "cached");
        assert!(!web.authorized(Some(&header("alice", "wrong"))));
        assert!(!web.authorized(Some(&header("bob", "secret"))));
        assert!(!web.authorized(None));
        assert!(!web.authorized(Some("Bearer x")));
    }
}
