#!/usr/bin/python3
"""Checks the rendered Kubernetes manifests of deploy/kubernetes (the output
of `kubectl kustomize`) against what the daemons need and accept. Prints TAP
lines (no plan); exits 0. Usage: k8s_check.py RENDERED.yaml BINDIR [replicas]"""
import re
import subprocess
import sys

import yaml

n = 0
failed = 0


def ok(cond, what, diag=None):
    global n, failed
    n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, what))
    if not cond:
        failed += 1
        if diag:
            print("#   " + str(diag))


docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
bindir = sys.argv[2]
replicas = len(sys.argv) > 3 and sys.argv[3] == "replicas"
by = {(d["kind"], d["metadata"]["name"]): d for d in docs}


def usage(binary):
    p = subprocess.run([bindir + "/" + binary, "--help"], capture_output=True, text=True)
    return p.stdout + p.stderr


def container(kind, name, cname):
    spec = by[(kind, name)]["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == cname), spec


def flags_known(c, binary):
    """every --flag of the container's args is in the binary's usage text"""
    text = usage(binary)
    unknown = [a.split("=")[0] for a in c.get("args", []) if a.startswith("--")
               and not re.search(re.escape(a.split("=")[0]) + r"\b", text)]
    ok(not unknown, "%s: every flag is one %s accepts" % (c["name"], binary), unknown)


def env_refs_defined(c):
    """every $(VAR) in args is an env var of the container"""
    names = {e["name"] for e in c.get("env", [])}
    refs = set(re.findall(r"\$\(([A-Z_]+)\)", " ".join(c.get("args", []))))
    ok(refs <= names, "%s: every $(VAR) of its args is defined" % c["name"], refs - names)


for kind, name in [("Namespace", "space"), ("StatefulSet", "postgres"), ("Service", "postgres"),
                   ("Deployment", "space-control"), ("Service", "space-control"),
                   ("DaemonSet", "space-worker"), ("Deployment", "space-edge"),
                   ("Service", "space-edge")]:
    ok((kind, name) in by, "%s %s is rendered" % (kind, name))
for d in docs:
    if d["kind"] != "Namespace":
        ok(d["metadata"].get("namespace") == "space", "%s %s is in namespace space" %
           (d["kind"], d["metadata"]["name"]))

# space-control: PostgreSQL store from a secret, unprivileged, no key in the image
c, spec = container("Deployment", "space-control", "space-control")
flags_known(c, "space-control")
env = {e["name"]: e for e in c.get("env", [])}
ok(env.get("SPACE_CONTROL_STORE", {}).get("valueFrom", {}).get("secretKeyRef", {}).get("name")
   == "space-control-store", "space-control: its store URL comes from a secret")
ok(spec["securityContext"].get("runAsNonRoot") is True and
   c["securityContext"].get("capabilities", {}).get("drop") == ["ALL"],
   "space-control runs as non-root with no capabilities")
want = 3 if replicas else 1
ok(by[("Deployment", "space-control")]["spec"]["replicas"] == want,
   "space-control: %d replica(s)" % want)
keys = by[("PersistentVolumeClaim", "space-control-keys")]["spec"]["accessModes"]
ok(keys == (["ReadWriteMany"] if replicas else ["ReadWriteOnce"]),
   "the key volume is %s" % ("shared by the replicas" if replicas else "one replica's"), keys)

# the worker: privileged sbx-manager with the pod UID as resident, node-api unprivileged
ds = by[("DaemonSet", "space-worker")]["spec"]["template"]["spec"]
m, _ = container("DaemonSet", "space-worker", "sbx-manager")
napi, _ = container("DaemonSet", "space-worker", "node-api")
flags_known(m, "sbx-manager")
flags_known(napi, "node-api")
env_refs_defined(m)
env_refs_defined(napi)
menv = {e["name"]: e for e in m["env"]}
ok(menv["POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid",
   "sbx-manager: POD_UID is the pod's UID (downward API)")
ok("--resident=$(POD_UID)" in m["args"], "sbx-manager: its resident is the pod's UID")
ok(m["securityContext"].get("privileged") is True, "sbx-manager is privileged (jails, netns, cgroups)")
ok(ds.get("hostNetwork") is True, "the worker is on the node's network (sandbox uplinks)")
ok(napi["securityContext"].get("runAsUser") == 65534 and
   napi["securityContext"].get("privileged") is not True and
   napi["securityContext"].get("capabilities", {}).get("drop") == ["ALL"],
   "node-api runs unprivileged, with no capabilities")
nmounts = {v["mountPath"] for v in napi.get("volumeMounts", [])}
ok(nmounts == {"/var/lib/space/worker/run"},
   "node-api sees the run directory only (not layers, records or credentials)", nmounts)
sock = next(a for a in napi["args"] if a.startswith("--manager-socket="))
ok(sock.split("=", 1)[1].startswith("/var/lib/space/worker/run/"),
   "node-api's manager socket is in that run directory")
cred = next(a for a in m["args"] if a.startswith("--credential-file="))
ok(cred.split("=", 1)[1].startswith("/etc/space/workers/") and
   any(v["name"] == "credentials" and v["secret"]["secretName"] == "space-worker-credentials"
       for v in ds["volumes"] if "secret" in v),
   "the worker credential comes from a secret, one key per node")
# snapshots travel over HTTP by digest: no volume is shared between workers
shared = [v.get("persistentVolumeClaim", {}).get("claimName") for v in ds["volumes"]
          if "persistentVolumeClaim" in v]
ok(not shared, "the worker mounts no shared volume (archives go to space-control by digest)", shared)
ok(("PersistentVolumeClaim", "space-snapshots") not in by, "no snapshot volume is rendered")

# space-edge: unprivileged, its edge credential from a secret, behind a Service
e, espec = container("Deployment", "space-edge", "space-edge")
flags_known(e, "space-edge")
env_refs_defined(e)
ok(espec["securityContext"].get("runAsNonRoot") is True and
   e["securityContext"].get("capabilities", {}).get("drop") == ["ALL"],
   "space-edge runs as non-root with no capabilities")
svc = by[("Service", "space-edge")]["spec"]
port = next(a for a in e["args"] if a.startswith("--listen=")).rsplit(":", 1)[1]
ok(str(svc["ports"][0]["targetPort"]) == port, "the space-edge Service reaches its listener")

# a secret a non-root container reads: group-readable through fsGroup, never
# world-readable (space-edge refuses a credential others may read)
for d in docs:
    if d["kind"] not in ("Deployment", "DaemonSet", "StatefulSet"):
        continue
    pspec = d["spec"]["template"]["spec"]
    for v in pspec.get("volumes", []):
        if "secret" not in v:
            continue
        mode = v["secret"].get("defaultMode", 0o644)
        users = [c for c in pspec["containers"] if any(m["name"] == v["name"]
                 for m in c.get("volumeMounts", []))]
        nonroot = [c for c in users if (c.get("securityContext", {}).get("runAsUser") or
                   pspec.get("securityContext", {}).get("runAsUser") or 0) != 0]
        ok(not (mode & 0o007), "%s: secret %s is not world-readable" % (d["metadata"]["name"],
           v["secret"]["secretName"]), oct(mode))
        if nonroot:
            ok(bool(mode & 0o040) and pspec.get("securityContext", {}).get("fsGroup") is not None,
               "%s: secret %s is readable by its non-root user (fsGroup, group-readable)" %
               (d["metadata"]["name"], v["secret"]["secretName"]), oct(mode))

# images: the project's own, named without a registry host
imgs = {c["image"] for d in docs if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet")
        for c in d["spec"]["template"]["spec"]["containers"]}
ok(all("/" not in i.split(":")[0] or "." not in i.split("/")[0] for i in imgs),
   "no image names a registry host", imgs)
ok("space:0.1.0" in imgs, "the daemons run the image space:0.1.0", imgs)
sys.exit(0)
