#!/bin/sh
# ci: once
# The Kubernetes manifests (deploy/kubernetes) rendered by `kubectl
# kustomize` and checked against the daemons: every flag a container
# passes is one its binary accepts, every $(VAR) is defined, the worker's
# resident is the pod UID, the privileged and the unprivileged parts are
# where docs/kubernetes.md says. No cluster runs here: this is what can be
# checked without one.
. "$SPACE_TOP/tests/lib.sh"

if ! command -v kubectl >/dev/null 2>&1; then
	# Debian's kubernetes-client has `kubectl kustomize`
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    kubernetes-client >/dev/null 2>&1 ||
	{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null 2>&1; }
fi
check "kubectl is there" sh -c "command -v kubectl >/dev/null"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PY=/usr/bin/python3
for o in base overlays/replicas; do
	kubectl kustomize "$SPACE_TOP/deploy/kubernetes/$o" >"$T/out.yaml" 2>"$T/err"
	is "kubectl kustomize $o renders" "$?" 0
	[ -s "$T/err" ] && grep -v 'deprecated' "$T/err" | sed 's/^/# /'
	case $o in overlays/replicas) mode=replicas ;; *) mode=single ;; esac
	$PY "$SPACE_TOP/tests/tools/k8s_check.py" "$T/out.yaml" "$SPACE_BIN" $mode >"$T/tap" 2>&1
	is "the $o checker ran" "$?" 0
	while IFS= read -r line; do
		case $line in
		"ok "*) check "$o: ${line#ok * - }" true ;;
		"not ok "*) check "$o: ${line#not ok * - }" false ;;
		*) diag "$line" ;;
		esac
	done <"$T/tap"
done
done_testing
