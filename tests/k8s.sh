#!/bin/sh
# k8s.sh: the Kubernetes manifests (packaging/kubernetes/) checked
# offline, as no cluster is at hand: each document parsed (python3-yaml),
# its apiVersion and kind ones this check knows, the fields each kind
# requires, the DaemonSet's selector matching its template, every
# volumeMount naming a volume, the Service selecting the DaemonSet's
# pods, and the ConfigMap's two configurations parsing as JSON with the
# keys each daemon reads for its sockets.  `kubectl kustomize` (offline)
# builds the kustomization when kubectl is installed.  (`kubectl create
# --dry-run=client` asks a server for its API groups, so it is not used.)
# Skips (77) only without python3's yaml module.
set -u
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
dir=$src/packaging/kubernetes
py=${PYTHON3:-python3}
if ! "$py" -c 'import yaml' 2>/dev/null; then
	echo "k8s: SKIP: no python3 yaml module (apt-get install python3-yaml)"
	exit 77
fi
"$py" - "$dir" <<'PYEOF' || exit 1
import glob, json, os, sys, yaml

d = sys.argv[1]
KNOWN = {("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"),
         ("v1", "Service"), ("v1", "Pod"), ("apps/v1", "DaemonSet"),
         ("kustomize.config.k8s.io/v1beta1", "Kustomization")}
bad = []
docs = []


def need(cond, where, what):
    if not cond:
        bad.append("%s: %s" % (where, what))
    return cond


def pod_spec(where, spec):
    vols = {v.get("name") for v in spec.get("volumes", [])}
    for v in spec.get("volumes", []):
        need(len([k for k in v if k != "name"]) == 1, where,
             "volume %s: one source" % v.get("name"))
    need(spec.get("containers"), where, "no containers")
    for c in spec.get("containers", []):
        w = "%s: container %s" % (where, c.get("name"))
        need(c.get("name") and c.get("image"), w, "name and image")
        for m in c.get("volumeMounts", []):
            need(m.get("name") in vols, w, "mount of no volume %r" %
                 m.get("name"))
            need(str(m.get("mountPath", "")).startswith("/"), w,
                 "mountPath %r" % m.get("mountPath"))


for p in sorted(glob.glob(os.path.join(d, "*.yaml"))):
    with open(p) as f:
        try:
            ds = [x for x in yaml.safe_load_all(f) if x is not None]
        except yaml.YAMLError as e:
            bad.append("%s: %s" % (p, e))
            continue
    for i, o in enumerate(ds):
        where = "%s#%d" % (os.path.basename(p), i)
        if not need(isinstance(o, dict), where, "not a mapping"):
            continue
        av, k = o.get("apiVersion"), o.get("kind")
        if not need((av, k) in KNOWN, where, "apiVersion/kind %r/%r" %
                    (av, k)):
            continue
        docs.append((where, o))
        if k == "Kustomization":
            for r in o.get("resources", []):
                need(os.path.exists(os.path.join(d, r)), where,
                     "resource %s missing" % r)
            continue
        md = o.get("metadata") or {}
        need(md.get("name"), where, "metadata.name")
        if k != "Namespace":
            need(md.get("namespace"), where, "metadata.namespace")
        spec = o.get("spec") or {}
        if k == "DaemonSet":
            sel = (spec.get("selector") or {}).get("matchLabels") or {}
            tl = ((spec.get("template") or {}).get("metadata") or
                  {}).get("labels") or {}
            need(sel and all(tl.get(a) == b for a, b in sel.items()),
                 where, "selector does not match the template")
            pod_spec(where, (spec.get("template") or {}).get("spec") or {})
        elif k == "Pod":
            pod_spec(where, spec)
        elif k == "Service":
            need(spec.get("ports"), where, "ports")
            for pt in spec.get("ports", []):
                need(isinstance(pt.get("port"), int), where, "port")
        elif k == "Secret":
            need(o.get("type") in ("Opaque", "kubernetes.io/tls"), where,
                 "type %r" % o.get("type"))
        elif k == "ConfigMap":
            for name, text in (o.get("data") or {}).items():
                if name.endswith(".json"):
                    try:
                        json.loads(text)
                    except ValueError as e:
                        bad.append("%s: %s: %s" % (where, name, e))

by = {(o["kind"], o.get("metadata", {}).get("name")): o for w, o in docs}
ds = by.get(("DaemonSet", "sluice"))
svc = by.get(("Service", "sluice-execd"))
cm = by.get(("ConfigMap", "sluice-config"))
if need(ds and svc and cm, "manifests", "DaemonSet sluice, Service "
        "sluice-execd and ConfigMap sluice-config"):
    tl = ds["spec"]["template"]["metadata"]["labels"]
    need(all(tl.get(a) == b for a, b in svc["spec"]["selector"].items()),
         "service.yaml", "its selector matches no DaemonSet pod")
    ps = ds["spec"]["template"]["spec"]
    need(ps.get("hostNetwork") is True, "daemonset.yaml",
         "hostNetwork (sluiced's nftables)")
    cs = {c["name"]: c for c in ps["containers"]}
    sd = cs.get("sluiced", {}).get("securityContext", {})
    need(not sd.get("privileged") and "NET_ADMIN" in
         sd.get("capabilities", {}).get("add", []) and
         sd.get("capabilities", {}).get("drop") == ["ALL"],
         "daemonset.yaml", "sluiced: NET_ADMIN, not privileged")
    need(cs.get("sluice-execd", {}).get("securityContext", {})
         .get("privileged") is True, "daemonset.yaml",
         "sluice-execd: privileged")
    hp = {v["hostPath"]["path"] for v in ps["volumes"] if "hostPath" in v}
    for h in ("/run/sluice", "/var/lib/sluice", "/var/log/sluice",
              "/var/lib/sluice-execd", "/run/sluice-execd"):
        need(h in hp, "daemonset.yaml", "hostPath %s" % h)
    x = json.loads(cm["data"]["sluice-execd.json"])
    s = json.loads(cm["data"]["sluiced.json"])
    need(x["control_socket"] == s["control"]["socket"], "configmap.yaml",
         "sluice-execd's control_socket is not sluiced's")
    port = int(x["tcp"]["listen"].rsplit(":", 1)[1])
    need(port in [p["port"] for p in svc["spec"]["ports"]], "service.yaml",
         "tcp.listen's port %d not served" % port)
    need(x["tcp"]["tls_cert"].startswith("/etc/sluice/tls/"),
         "configmap.yaml", "tls_cert not in the TLS Secret's mount")

for b in bad:
    print("k8s: FAIL: %s" % b)
print("k8s: %d documents, %d problems" % (len(docs), len(bad)))
sys.exit(1 if bad else 0)
PYEOF
if command -v kubectl >/dev/null 2>&1; then
	if ! kubectl kustomize "$dir" >/dev/null; then
		echo "k8s: FAIL: kubectl kustomize $dir"
		exit 1
	fi
	echo "k8s: kubectl kustomize: ok"
else
	echo "k8s: no kubectl: the kustomization not built"
fi
exit 0
