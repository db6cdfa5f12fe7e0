#!/usr/bin/env python3
"""Writes an OCI image layout for the template tests, with no registry and
no container tool: python's tarfile makes the layers.

  mkoci.py DIR tiny      a shell (the host's dash and its libc), two layers:
                         the second deletes a file of the first (whiteout)
                         and adds one; config Env, User 1000, WorkingDir /srv
  mkoci.py DIR hostile   one layer of attacks: ../ paths, an absolute path,
                         a symlink to / then a file written through it, a
                         symlink to .. then through it, device nodes, a fifo,
                         setuid and setgid files
"""
import gzip, hashlib, io, json, os, sys, tarfile

def add_bytes(tf, name, data, mode=0o644, **kw):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = mode
    for k, v in kw.items():
        setattr(ti, k, v)
    tf.addfile(ti, io.BytesIO(data))

def add_dir(tf, name, mode=0o755):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    ti.mode = mode
    tf.addfile(ti)

def add_link(tf, name, target):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.SYMTYPE
    ti.linkname = target
    tf.addfile(ti)

def add_special(tf, name, typ, major=0, minor=0, mode=0o666):
    ti = tarfile.TarInfo(name)
    ti.type = typ
    ti.devmajor, ti.devminor, ti.mode = major, minor, mode
    tf.addfile(ti)

def layer(build):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        build(tf)
    raw = raw.getvalue()
    gz = gzip.compress(raw, mtime=0)
    return gz, "sha256:" + hashlib.sha256(raw).hexdigest()

def blob(out, data):
    d = hashlib.sha256(data).hexdigest()
    with open(os.path.join(out, "blobs", "sha256", d), "wb") as f:
        f.write(data)
    return "sha256:" + d, len(data)

def host_file(p):
    with open(os.path.realpath(p), "rb") as f:
        return f.read()

def tiny1(tf):
    for d in ("bin", "lib", "lib/x86_64-linux-gnu", "lib64", "etc", "srv", "home"):
        add_dir(tf, d)
    add_dir(tf, "data", 0o1777)
    add_bytes(tf, "bin/sh", host_file("/bin/dash"), 0o755)
    add_bytes(tf, "lib/x86_64-linux-gnu/libc.so.6", host_file("/lib/x86_64-linux-gnu/libc.so.6"), 0o755)
    add_bytes(tf, "lib64/ld-linux-x86-64.so.2", host_file("/lib64/ld-linux-x86-64.so.2"), 0o755)
    add_bytes(tf, "etc/passwd", b"root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n")
    add_bytes(tf, "etc/greeting", b"hello from layer one\n")
    add_bytes(tf, "etc/doomed", b"deleted by layer two\n")

def tiny2(tf):
    add_dir(tf, "etc")
    add_bytes(tf, "etc/.wh.doomed", b"")
    add_bytes(tf, "etc/second", b"from layer two\n")

def hostile(tf):
    tag = os.environ.get("MKOCI_TAG", "x")
    add_dir(tf, "etc")
    add_bytes(tf, "etc/ok", b"ok\n")
    add_bytes(tf, "../dotdot-" + tag, b"escaped\n")
    add_bytes(tf, "a/../../dotdot2-" + tag, b"escaped\n")
    add_bytes(tf, "/tmp/abs-" + tag, b"escaped\n")
    add_link(tf, "rootlink", "/")
    add_bytes(tf, "rootlink/tmp/through-" + tag, b"escaped\n")
    add_link(tf, "uplink", "../../../../../../..")
    add_bytes(tf, "uplink/tmp/up-" + tag, b"escaped\n")
    add_special(tf, "etc/mem", tarfile.CHRTYPE, 1, 1)
    add_special(tf, "etc/sda", tarfile.BLKTYPE, 8, 0)
    add_special(tf, "etc/fifo", tarfile.FIFOTYPE)
    add_bytes(tf, "etc/suid", b"#!/bin/sh\n", 0o4755)
    add_bytes(tf, "etc/sgid", b"#!/bin/sh\n", 0o2755)

def main():
    out, kind = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "blobs", "sha256"))
    layers = [tiny1, tiny2] if kind == "tiny" else [hostile]
    descs, diffs = [], []
    for b in layers:
        gz, diff = layer(b)
        d, n = blob(out, gz)
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": n})
        diffs.append(diff)
    cfg = {"architecture": "amd64", "os": "linux",
           "config": {"Env": ["PATH=/bin", "GREETING=hello from the config"],
                      "User": "1000", "WorkingDir": "/srv", "Cmd": ["sh"]},
           "rootfs": {"type": "layers", "diff_ids": diffs}}
    cd, cn = blob(out, json.dumps(cfg).encode())
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cn},
           "layers": descs}
    md, mn = blob(out, json.dumps(man).encode())
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": mn,
            "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)

main()
