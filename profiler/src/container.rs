//! Which container a cgroup belongs to: the runtime, the container's id and name, and for a
//! Kubernetes pod its namespace, pod and container names.
//!
//! The id comes from the cgroup path, where every runtime puts it (`libpod-<id>` for podman,
//! `docker-<id>.scope` or `docker/<id>`, `cri-containerd-<id>.scope`, `crio-<id>.scope`, a bare
//! `<id>` below `kubepods`). The names come from the runtime's own state for that id, never from
//! the path:
//! - the OCI bundle's `config.json`, whose annotations carry what a CRI runtime set
//!   (`io.kubernetes.pod.name`... from CRI-O, `io.kubernetes.cri.sandbox-name`... from
//!   containerd), found in the runtimes' state directories or through the OCI runtime's
//!   `state.json` (`bundle=` label);
//! - podman's container store (`containers.json`: its names) and docker's `config.v2.json`.
//!
//! When no state is readable (another mount namespace, a runtime not known here), the path's
//! convention alone names the runtime and id, and `source` says so.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

use serde::Serialize;

/// A container, as its runtime knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Container {
    /// "podman", "docker", "containerd", "cri-o".
    pub runtime: &'static str,
    /// The full id (64 hex digits).
    pub id: String,
    /// The runtime's name for it; `None` where no state was readable.
    pub name: Option<String>,
    /// Kubernetes' names, from the CRI annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<Kubernetes>,
    /// Where the identity was read: a state file's path, or "cgroup path" alone.
    pub source: String,
}

/// A Kubernetes container's names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kubernetes {
    pub namespace: String,
    pub pod: String,
    /// Empty for a pod's sandbox (pause) container.
    pub container: String,
}

impl Container {
    /// How tables name it: "namespace/pod/container" for Kubernetes, else "name (runtime
    /// 12-digit id)", or "runtime 12-digit id" with no name.
    #[must_use]
    pub fn display(&self) -> String {
        let short = &self.id[..self.id.len().min(12)];
        match (&self.kubernetes, &self.name) {
            (Some(k), _) if k.container.is_empty() => {
                format!("{}/{} (sandbox)", k.namespace, k.pod)
            }
            (Some(k), _) => format!("{}/{}/{}", k.namespace, k.pod, k.container),
            (None, Some(name)) => format!("{name} ({} {short})", self.runtime),
            (None, None) => format!("{} {short}", self.runtime),
        }
    }

    /// Its identity as label pairs (Prometheus labels, OTLP attributes): the runtime, id and
    /// name, and the Kubernetes names when it has them.
    #[must_use]
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("container_runtime", self.runtime.to_owned()),
            ("container_id", self.id.clone()),
            ("container_name", self.name.clone().unwrap_or_default()),
        ];
        if let Some(k) = &self.kubernetes {
            out.extend([
                ("k8s_namespace", k.namespace.clone()),
                ("k8s_pod", k.pod.clone()),
                ("k8s_container", k.container.clone()),
            ]);
        }
        out
    }

    /// Its identity as OpenTelemetry's semantic conventions name it (`container.*`, `k8s.*`).
    #[must_use]
    pub fn otel_attributes(&self) -> Vec<(&'static str, String)> {
        self.labels()
            .into_iter()
            .map(|(k, v)| {
                let key = match k {
                    "container_runtime" => "container.runtime",
                    "container_id" => "container.id",
                    "container_name" => "container.name",
                    "k8s_namespace" => "k8s.namespace.name",
                    "k8s_pod" => "k8s.pod.name",
                    _ => "k8s.container.name",
                };
                (key, v)
            })
            .collect()
    }

    /// Whether `wanted` (`--container`) names it: its name, its Kubernetes container or
    /// namespace/pod/container, or an id prefix of at least 4 hex digits.
    #[must_use]
    pub fn matches(&self, wanted: &str) -> bool {
        self.name.as_deref() == Some(wanted)
            || self.kubernetes.as_ref().is_some_and(|k| {
                wanted == format!("{}/{}/{}", k.namespace, k.pod, k.container)
                    || (!k.container.is_empty() && wanted == k.container)
            })
            || (wanted.len() >= 4
                && wanted.chars().all(|c| c.is_ascii_hexdigit())
                && self.id.starts_with(&wanted.to_ascii_lowercase()))
    }
}

/// The runtime and container id a cgroup path names by convention, from the deepest component
/// that names one; `None` for a path of no container (a conmon's, a systemd service's).
#[must_use]
pub fn from_cgroup_path(path: &str) -> Option<(&'static str, String)> {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    components.iter().enumerate().rev().find_map(|(i, c)| {
        let c = c.strip_suffix(".scope").unwrap_or(c);
        let prefixed = [
            ("libpod-", "podman"),
            ("docker-", "docker"),
            ("cri-containerd-", "containerd"),
            ("crio-", "cri-o"),
        ];
        for (prefix, runtime) in prefixed {
            if let Some(id) = c.strip_prefix(prefix)
                && is_id(id)
            {
                return Some((runtime, id.to_owned()));
            }
        }
        if is_id(c) {
            // A bare id: docker's cgroupfs driver (`/docker/<id>`), or a kubelet's cgroupfs
            // driver (`/kubepods/burstable/pod<uid>/<id>`), whose runtime the state tells.
            let parent = i.checked_sub(1).map(|p| components[p]);
            let runtime = match parent {
                Some("docker") => "docker",
                Some(p) if p.starts_with("pod") => "cri",
                _ => return None,
            };
            return Some((runtime, c.to_owned()));
        }
        None
    })
}

/// `--container WANTED`: the cgroup path (relative to the cgroup2 root) of the one running container
/// `wanted` names ([`Container::matches`]); its outermost cgroup when it has several (podman's
/// `libpod-<id>` and the `container` below it).
pub fn cgroup_of(wanted: &str) -> anyhow::Result<String> {
    if crate::cgroup::cgroup2_root().is_none() {
        anyhow::bail!(
            "--container {wanted}: no cgroup2 hierarchy is mounted here, so no container's cgroup can be found"
        );
    }
    let mut paths: Vec<String> = crate::cgroup::paths_by_id().into_values().collect();
    paths.sort_by_key(|p| (p.matches('/').count(), p.clone()));
    let mut resolver = Resolver::default();
    let mut found: Vec<(String, Container)> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for path in paths {
        let Some(container) = resolver.resolve(&path) else {
            continue;
        };
        if found.iter().any(|(_, c)| c.id == container.id) {
            continue;
        }
        if container.matches(wanted) {
            found.push((path, container));
        } else if !seen.contains(&container.display()) {
            seen.push(container.display());
        }
    }
    match found.len() {
        // Relative to the cgroup2 mount, as `--cgroup` takes it.
        1 => Ok(found.remove(0).0.trim_start_matches('/').to_owned()),
        0 if seen.is_empty() => anyhow::bail!(
            "--container {wanted}: no running container was found (no cgroup is named as podman, docker, containerd or CRI-O name theirs); give its cgroup with --cgroup PATH"
        ),
        0 => anyhow::bail!(
            "--container {wanted}: no running container has that name or id; running: {}",
            seen.join(", ")
        ),
        _ => anyhow::bail!(
            "--container {wanted}: names {} containers ({}); give more of the id",
            found.len(),
            found
                .iter()
                .map(|(_, c)| c.display())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A container id: 64 lowercase hex digits.
fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Where runtimes keep their state, below the root the host's files are seen at ("/" unless
/// the profiler runs in a container with the host's root mounted elsewhere: `PROFILER_HOST_ROOT`).
struct StateRoots {
    root: PathBuf,
}

impl StateRoots {
    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    /// The OCI bundle config.json candidates for `id`, in the order tried.
    fn bundle_configs(&self, id: &str) -> Vec<PathBuf> {
        let mut found = vec![
            // podman (root's graph root), CRI-O and podman's run root.
            self.path(&format!(
                "/var/lib/containers/storage/overlay-containers/{id}/userdata/config.json"
            )),
            self.path(&format!(
                "/run/containers/storage/overlay-containers/{id}/userdata/config.json"
            )),
        ];
        // containerd's shims, any namespace (k8s.io for the CRI, moby for docker).
        for tasks in [
            "/run/containerd/io.containerd.runtime.v2.task",
            "/run/docker/containerd/daemon/io.containerd.runtime.v2.task",
        ] {
            for ns in fs::read_dir(self.path(tasks))
                .into_iter()
                .flatten()
                .flatten()
            {
                found.push(ns.path().join(id).join("config.json"));
            }
        }
        // Any OCI runtime's state (runc, crun), which names the bundle.
        for state_root in [
            "/run/runc",
            "/run/crun",
            "/run/containerd/runc",
            "/run/docker/runtime-runc/moby",
        ] {
            let state_root = self.path(state_root);
            let mut dirs = vec![state_root.clone()];
            dirs.extend(
                fs::read_dir(&state_root)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
            for dir in dirs {
                if let Some(bundle) = bundle_of_state(&dir.join(id).join("state.json")) {
                    found.push(self.path(&bundle).join("config.json"));
                }
            }
        }
        found
    }
}

/// The `bundle=` label of an OCI runtime's state.json (runc writes the spec's annotations and
/// the bundle there as labels).
fn bundle_of_state(state: &Path) -> Option<String> {
    let text = fs::read_to_string(state).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["config"]["labels"]
        .as_array()?
        .iter()
        .filter_map(|l| l.as_str())
        .find_map(|l| l.strip_prefix("bundle="))
        .map(str::to_owned)
}

/// Names the containers of cgroup paths, remembering what it read (a container's identity does
/// not change; state not readable yet is tried again next time).
#[derive(Default)]
pub struct Resolver {
    known: HashMap<String, Option<Container>>,
    /// podman's names by id, read once per miss.
    podman_names: Option<HashMap<String, Vec<String>>>,
}

impl Resolver {
    /// A resolver that has named the containers of `paths` already.
    pub fn knowing<'a>(paths: impl Iterator<Item = &'a str>) -> Self {
        let mut resolver = Self::default();
        for path in paths {
            let _ = resolver.resolve(path);
        }
        resolver
    }

    /// The container of the cgroup at `path` (below the cgroup2 root), if it is one's.
    pub fn resolve(&mut self, path: &str) -> Option<Container> {
        if let Some(known) = self.known.get(path) {
            return known.clone();
        }
        let (runtime, id) = from_cgroup_path(path)?;
        let container = self.read_state(runtime, &id);
        let from_state = container.source != "cgroup path";
        if from_state {
            self.known.insert(path.to_owned(), Some(container.clone()));
        }
        Some(container)
    }

    fn read_state(&mut self, runtime: &'static str, id: &str) -> Container {
        let roots = StateRoots {
            root: std::env::var_os("PROFILER_HOST_ROOT").map_or_else(|| "/".into(), PathBuf::from),
        };
        let mut container = Container {
            runtime: if runtime == "cri" {
                "containerd"
            } else {
                runtime
            },
            id: id.to_owned(),
            name: None,
            kubernetes: None,
            source: "cgroup path".to_owned(),
        };
        for config in roots.bundle_configs(id) {
            let Some(annotations) = annotations_of(&config) else {
                continue;
            };
            container.source = config.display().to_string();
            container.kubernetes = kubernetes_of(&annotations);
            // The path named the runtime, but for a bare id below kubepods: the annotations
            // tell containerd's CRI plugin from CRI-O (podman writes some of CRI-O's too, and
            // its own manager's name).
            if runtime == "cri" {
                let any = |prefix: &str| annotations.keys().any(|k| k.starts_with(prefix));
                container.runtime = if annotations.get("io.container.manager").map(String::as_str)
                    == Some("libpod")
                {
                    "podman"
                } else if any("io.kubernetes.cri.") {
                    "containerd"
                } else if any("io.kubernetes.cri-o.") {
                    "cri-o"
                } else {
                    container.runtime
                };
            }
            break;
        }
        if container.runtime == "podman" {
            let names = self
                .podman_names
                .get_or_insert_with(|| podman_names(&roots))
                .get(id)
                .cloned();
            if names.is_none() {
                // Created since the store was read.
                self.podman_names = None;
            }
            container.name = names.and_then(|n| n.into_iter().next());
        }
        if container.runtime == "docker" {
            let config = roots.path(&format!("/var/lib/docker/containers/{id}/config.v2.json"));
            if let Some(name) = fs::read_to_string(&config)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| {
                    v["Name"]
                        .as_str()
                        .map(|n| n.trim_start_matches('/').to_owned())
                })
            {
                container.name = Some(name);
                if container.source == "cgroup path" {
                    container.source = config.display().to_string();
                }
            }
        }
        if container.name.is_none()
            && let Some(k) = &container.kubernetes
            && !k.container.is_empty()
        {
            container.name = Some(k.container.clone());
        }
        container
    }
}

/// The annotations of an OCI bundle's config.json; `None` when it is not readable.
fn annotations_of(config: &Path) -> Option<HashMap<String, String>> {
    let text = fs::read_to_string(config).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(
        value["annotations"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// Kubernetes' names from the CRI annotations: CRI-O's (`io.kubernetes.pod.*`,
/// `io.kubernetes.container.name`) or containerd's (`io.kubernetes.cri.sandbox-*`,
/// `io.kubernetes.cri.container-name`).
fn kubernetes_of(annotations: &HashMap<String, String>) -> Option<Kubernetes> {
    let get = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| annotations.get(*k))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    let pod = get(&["io.kubernetes.pod.name", "io.kubernetes.cri.sandbox-name"])?;
    let namespace = get(&[
        "io.kubernetes.pod.namespace",
        "io.kubernetes.cri.sandbox-namespace",
    ])
    .unwrap_or_else(|| "default".to_owned());
    let container = get(&[
        "io.kubernetes.container.name",
        "io.kubernetes.cri.container-name",
    ])
    .unwrap_or_default();
    Some(Kubernetes {
        namespace,
        pod,
        container,
    })
}

/// podman's container names by id, from containers/storage's `containers.json` (root's store).
fn podman_names(roots: &StateRoots) -> HashMap<String, Vec<String>> {
    let store = roots.path("/var/lib/containers/storage/overlay-containers/containers.json");
    let Some(entries) = fs::read_to_string(store)
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<serde_json::Value>>(&t).ok())
    else {
        return HashMap::new();
    };
    entries
        .iter()
        .filter_map(|e| {
            let id = e["id"].as_str()?.to_owned();
            let names = e["names"]
                .as_array()
                .map(|n| {
                    n.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            Some((id, names))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f3a2b1c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a";

    #[test]
    fn each_runtimes_cgroup_path_names_its_container() {
        let cases = [
            (format!("/libpod_parent/libpod-{ID}"), "podman"),
            (
                format!("/machine.slice/libpod-{ID}.scope/container"),
                "podman",
            ),
            (format!("/system.slice/docker-{ID}.scope"), "docker"),
            (format!("/docker/{ID}"), "docker"),
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-{ID}.scope"
                ),
                "containerd",
            ),
            (
                format!("/kubepods.slice/kubepods-pod1234.slice/crio-{ID}.scope"),
                "cri-o",
            ),
            (format!("/kubepods/burstable/pod5678/{ID}"), "cri"),
        ];
        for (path, runtime) in cases {
            assert_eq!(
                from_cgroup_path(&path),
                Some((runtime, ID.to_owned())),
                "{path}"
            );
        }
        for not_one in [
            "/",
            "/system.slice/ssh.service",
            &format!("/libpod_parent/conmon-{ID}"),
            &format!("/libpod_parent/libpod-{}", &ID[..12]),
            &format!("/user.slice/{ID}"),
        ] {
            assert_eq!(from_cgroup_path(not_one), None, "{not_one}");
        }
    }

    #[test]
    fn cri_annotations_name_the_pod() {
        let crio: HashMap<String, String> = [
            ("io.kubernetes.pod.name", "web-7d9f"),
            ("io.kubernetes.pod.namespace", "shop"),
            ("io.kubernetes.container.name", "nginx"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let k = kubernetes_of(&crio).unwrap();
        assert_eq!(
            (k.namespace.as_str(), k.pod.as_str(), k.container.as_str()),
            ("shop", "web-7d9f", "nginx")
        );
        let containerd: HashMap<String, String> = [
            ("io.kubernetes.cri.sandbox-name", "web-7d9f"),
            ("io.kubernetes.cri.sandbox-namespace", "shop"),
            ("io.kubernetes.cri.container-type", "sandbox"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let k = kubernetes_of(&containerd).unwrap();
        assert_eq!(k.container, "");
        let c = Container {
            runtime: "containerd",
            id: ID.to_owned(),
            name: None,
            kubernetes: Some(k),
            source: "x".to_owned(),
        };
        assert_eq!(c.display(), "shop/web-7d9f (sandbox)");
        assert!(kubernetes_of(&HashMap::new()).is_none());
    }

    #[test]
    fn containers_are_chosen_by_name_or_id_prefix() {
        let c = Container {
            runtime: "podman",
            id: ID.to_owned(),
            name: Some("web".to_owned()),
            kubernetes: None,
            source: "x".to_owned(),
        };
        assert_eq!(c.display(), "web (podman 4f3a2b1c9d8e)");
        assert!(c.matches("web"));
        assert!(c.matches("4f3a2b"));
        assert!(c.matches("4F3A2B"));
        assert!(!c.matches("4f3"), "too short a prefix");
        assert!(!c.matches("we"));
    }
}
