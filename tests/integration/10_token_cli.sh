#!/bin/sh
# space token verify / inspect / sign: the official PASETO v4 vectors, a
# cross-check against an independent implementation (tests/tools/paseto_check.py,
# PyNaCl) in both directions, and malformed tokens refused with a reason.
. "$SPACE_TOP/tests/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
VEC=${SPACE_VECTORS:-$SPACE_TOP/../shared/vectors}
CHECK="$SPACE_TOP/tests/tools/paseto_check.py"
# Debian's python3 carries PyNaCl (packages.txt); another python3 earlier
# in PATH may not
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# run CMD...: sets rc, out (stdout) and err (stderr)
run() {
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	out=$(cat "$tmp/out")
	err=$(cat "$tmp/err")
}
# refused "what" CMD...: exit 1 and a "space: token: reason" line on stderr
refused() {
	d=$1; shift
	run "$@"
	if [ "$rc" = 1 ] && [ -z "$out" ] && printf '%s' "$err" | grep -q '^space: token: .'; then
		ok "$d (${err#space: token: })"
	else
		not_ok "$d"; echo "#   rc=$rc out='$out' err='$err'"
	fi
}

# ---- the official vectors, one directory per case ----
"$PY" - "$VEC/paseto-v4.json" "$tmp/vec" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
for t in d["tests"]:
    if not t["name"].startswith(("4-S-", "4-F-")):
        continue
    p = os.path.join(sys.argv[2], t["name"])
    os.makedirs(p)
    pk = t.get("public-key") or "1eb9dbbbbc047c03fd70604e0071f0987e16b28b757225c11f00415d0e20b1a2"
    for k, v in (("pk", pk), ("token", t["token"]), ("payload", t["payload"] or ""),
                 ("footer", t["footer"]), ("implicit", t["implicit-assertion"]),
                 ("fail", "1" if t["expect-fail"] else "0")):
        open(os.path.join(p, k), "w").write(v)
EOF
check "vectors extracted" test -d "$tmp/vec/4-S-1"
nS=0 nF=0
for d in "$tmp"/vec/*; do
	name=$(basename "$d")
	pk=$(cat "$d/pk"); tok=$(cat "$d/token"); footer=$(cat "$d/footer"); imp=$(cat "$d/implicit")
	if [ "$(cat "$d/fail")" = 0 ]; then
		nS=$((nS + 1))
		if [ -n "$footer" ]; then
			run space token verify --public-key "$pk" --footer "$footer" --implicit "$imp" "$tok"
		else
			run space token verify --public-key "$pk" --implicit "$imp" "$tok"
		fi
		is "$name: verify exits 0" "$rc" 0
		is "$name: prints the payload" "$out" "$(cat "$d/payload")"
		refused "$name: wrong implicit assertion" space token verify --public-key "$pk" --implicit "x$imp" "$tok"
	else
		nF=$((nF + 1))
		refused "$name: failure vector" space token verify --public-key "$pk" --implicit "$imp" "$tok"
	fi
done
check "3 or more success vectors ($nS)" test "$nS" -ge 3
check "5 or more failure vectors ($nF)" test "$nF" -ge 5

# the same public key as a k4.public PASERK (from the PASERK vectors' pair)
pk=$(cat "$tmp/vec/4-S-1/pk"); tok=$(cat "$tmp/vec/4-S-1/token")
paserk=$("$PY" -c 'import base64,sys;print("k4.public."+base64.urlsafe_b64encode(bytes.fromhex(sys.argv[1])).decode().rstrip("="))' "$pk")
run space token verify --public-key "$paserk" "$tok"
is "verify with a k4.public key" "$rc" 0
refused "k3.public key refused" space token verify --public-key "k3${paserk#k4}" "$tok"
refused "short hex key refused" space token verify --public-key "${pk%??}" "$tok"

# ---- cross-check with the independent implementation ----
seed=$("$PY" -c 'import os;print(os.urandom(32).hex())')
pub=$("$PY" -c 'import sys,nacl.signing;print(nacl.signing.SigningKey(bytes.fromhex(sys.argv[1])).verify_key.encode().hex())' "$seed")
check "independent checker available" test -n "$pub"
payload='{"hello":"world","n":[1,2,3]}'
foot='{"kid":"k4.pid.test"}'
run space token sign --secret-key "$seed" --footer "$foot" --implicit space-capability-v1 "$payload"
is "space token sign" "$rc" 0
ours=$out
run "$PY" "$CHECK" verify "$pub" "$ours" space-capability-v1 "$foot"
is "our token verifies independently" "$rc" 0
is "independent verifier reads our payload" "$out" "$payload"
run "$PY" "$CHECK" verify "$pub" "$ours" space-key-bundle-v1
is "independent verifier refuses our token under another implicit assertion" "$rc" 1
theirs=$("$PY" "$CHECK" sign "$seed" "$payload" space-capability-v1 "$foot")
is "both implementations make the same token (Ed25519 is deterministic)" "$theirs" "$ours"
theirs=$("$PY" "$CHECK" sign "$seed" "$payload" "" "")
run space token verify --public-key "$pub" "$theirs"
is "independent token without footer verifies with space" "$rc" 0
is "payload of the independent token" "$out" "$payload"
printf '%s\n' "$ours" >"$tmp/tok"
run sh -c "space token verify --public-key $pub --implicit space-capability-v1 - <'$tmp/tok'"
is "token read from standard input" "$out" "$payload"

# ---- malformed and tampered tokens ----
len=${#ours}
refused "truncated token" space token verify --public-key "$pub" --implicit space-capability-v1 "$(printf '%s' "$ours" | cut -c1-$((len - 5)))"
refused "extra part" space token verify --public-key "$pub" --implicit space-capability-v1 "$ours.e30"
refused "padding '='" space token verify --public-key "$pub" --implicit space-capability-v1 "$ours="
refused "invalid base64url character" space token verify --public-key "$pub" --implicit space-capability-v1 "$(printf '%s' "$ours" | sed 's/^\(v4\.public\.....\)./\1+/')"
refused "v4.local header" space token verify --public-key "$pub" --implicit space-capability-v1 "$(printf '%s' "$ours" | sed 's/^v4\.public\./v4.local./')"
refused "v3.public header" space token verify --public-key "$pub" --implicit space-capability-v1 "$(printf '%s' "$ours" | sed 's/^v4/v3/')"
refused "missing implicit assertion" space token verify --public-key "$pub" "$ours"
refused "footer does not match --footer" space token verify --public-key "$pub" --implicit space-capability-v1 --footer '{"kid":"other"}' "$ours"
body=${ours%.*}
refused "footer swapped" space token verify --public-key "$pub" --implicit space-capability-v1 "$body.eyJraWQiOiJ4In0"
refused "footer removed" space token verify --public-key "$pub" --implicit space-capability-v1 "$body"
flipped=$("$PY" - "$ours" <<'EOF'
import base64, sys
_, _, b, f = sys.argv[1].split(".")
raw = bytearray(base64.urlsafe_b64decode(b + "=" * (-len(b) % 4)))
raw[-1] ^= 1
print("v4.public." + base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=") + "." + f)
EOF
)
refused "flipped signature bit" space token verify --public-key "$pub" --implicit space-capability-v1 "$flipped"
refused "empty token" space token verify --public-key "$pub" ""
big=$("$PY" -c 'print("v4.public." + "A" * 70000)')
refused "token over the size limit" space token verify --public-key "$pub" "$big"
refused "wrong key" space token verify --public-key "$(cat "$tmp/vec/4-S-1/pk")" --implicit space-capability-v1 "$ours"
run space token verify "$ours"
is "usage error without --public-key exits 2" "$rc" 2
run space token verify --public-key "$pub" a b
is "usage error with two tokens exits 2" "$rc" 2
run space token frobnicate
is "unknown subcommand exits 2" "$rc" 2
run space token verify --help
is "--help exits 0" "$rc" 0

# ---- inspect: a real capability ----
claims='{"iss":"space-control","sub":"prn_1","jti":"AAECAwQFBgcICQoLDA0ODw","aud":"node-api","pur":"control","iat":"2026-01-01T00:00:00Z","exp":"2026-01-01T00:02:00Z","sbx":"sbx_a","gen":18446744073709551615,"wrk":"wrk_1","sst":"jail","act":2,"res":"inc_9","acc":["exec","fs:r"]}'
cap=$(space token sign --secret-key "$seed" --footer "$foot" --implicit space-capability-v1 "$claims")
run space token inspect --public-key "$pub" "$cap"
is "inspect exits 0" "$rc" 0
got=$(printf '%s' "$out" | "$PY" -c 'import json,sys;d=json.load(sys.stdin);print(d["sbx"],d["gen"],d["act"],",".join(d["acc"]),d["pur"])')
is "inspect prints the claims as JSON" "$got" "sbx_a 18446744073709551615 2 exec,fs:r control"
check "inspect output is pretty (one claim per line)" test "$(printf '%s\n' "$out" | wc -l)" -ge 14
bad=$(printf '%s' "$claims" | sed 's/}$/,"admin":true}/')
cap=$(space token sign --secret-key "$seed" --implicit space-capability-v1 "$bad")
refused "inspect refuses an unknown claim" space token inspect --public-key "$pub" "$cap"
bad=$(printf '%s' "$claims" | sed 's/"acc":\[[^]]*\]/"acc":["exec"],"port":80/')
cap=$(space token sign --secret-key "$seed" --implicit space-capability-v1 "$bad")
refused "inspect refuses a control capability with a port" space token inspect --public-key "$pub" "$cap"
cap=$(space token sign --secret-key "$seed" --implicit space-key-bundle-v1 "$claims")
refused "inspect refuses a token signed for another purpose" space token inspect --public-key "$pub" "$cap"
cap=$(space token sign --secret-key "$seed" --implicit space-capability-v1 "$(printf '%s' "$claims" | sed 's/"gen":[0-9]*/"gen":"7"/')")
refused "inspect refuses gen as a string" space token inspect --public-key "$pub" "$cap"
printf '%s\n' "$seed" >"$tmp/seed"
chmod 600 "$tmp/seed"
run space token sign --secret-key-file "$tmp/seed" --implicit space-capability-v1 "$claims"
run space token inspect --public-key "$pub" "$out"
is "sign with --secret-key-file" "$rc" 0

done_testing
