#!/usr/bin/python3
"""Re-signs a capability with other times, as a holder of the control
plane's signing key could: the test double for a control plane that issued
a token in the past (space-control itself has no way to back-date).

  mint_cap.py KEYDIR TOKEN BACKDATE
      reads TOKEN's claims and footer (not verified: the caller got it from
      space-control), moves iat and exp BACKDATE seconds into the past
      (exp - iat stays 120), signs the result with KEYDIR/<kid>.key (the key
      the footer names) through paseto_check.py, and prints the token.
  mint_cap.py KEYDIR TOKEN BACKDATE OLD:NEW
      the same, with every claim whose value is OLD (TOKEN's sandbox) set
      to NEW (a capability for a sandbox the control plane never made)
"""
import base64
import json
import os
import subprocess
import sys


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    keydir, token, back = argv[1], argv[2], int(argv[3])
    parts = token.split(".")
    if len(parts) != 4 or parts[:2] != ["v4", "public"]:
        print("mint_cap: not a v4.public token with a footer", file=sys.stderr)
        return 1
    body, footer = b64d(parts[2]), b64d(parts[3]).decode()
    claims = json.loads(body[:-64])         # the signature is the last 64 bytes
    kid = json.loads(footer)["kid"]
    with open(os.path.join(keydir, kid[len("k4.pid."):] + ".key")) as f:
        seed = json.load(f)["secret"]
    from datetime import datetime, timedelta, timezone
    iat = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=back)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    claims["iat"] = iat.strftime(fmt)
    claims["exp"] = (iat + timedelta(seconds=120)).strftime(fmt)
    if len(argv) == 5:
        old, new = argv[4].split(":", 1)

        def swap(v):
            if isinstance(v, dict):
                return {k: swap(x) for k, x in v.items()}
            if isinstance(v, list):
                return [swap(x) for x in v]
            return new if v == old else v
        claims = swap(claims)
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(["/usr/bin/python3", os.path.join(here, "paseto_check.py"), "sign",
                        seed, json.dumps(claims, separators=(",", ":")),
                        "space-capability-v1", footer], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr, end="")
        return 1
    print(r.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
