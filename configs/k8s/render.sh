#!/bin/sh
# render.sh [NAME=VALUE...] FILE.yaml — prints a config of configs/k8s with its parameters
# set (kubectl apply -f - takes it). Parameters and the value each file holds:
#   IMAGE=wharf:0.5.0              the image built from configs/k8s/Dockerfile
#   SRIOV_RESOURCE=intel.com/sriov the SR-IOV device plugin's resource name (dpdk variants)
#   SRIOV_NETWORK=wharf-sriov      the NetworkAttachmentDefinition Multus attaches (dpdk)
#   TOKEN_SECRET=wharf-ctl-token   the Secret holding the PS control token (key: token)
# A value of the wrong shape is refused with one line naming it.
set -eu
die() { echo "render.sh: $*" >&2; exit 2; }
image=wharf:0.5.0 resource=intel.com/sriov network=wharf-sriov secret=wharf-ctl-token
file=
for a in "$@"; do
	case $a in
	IMAGE=*) image=${a#*=} ;;
	SRIOV_RESOURCE=*) resource=${a#*=} ;;
	SRIOV_NETWORK=*) network=${a#*=} ;;
	TOKEN_SECRET=*) secret=${a#*=} ;;
	*=*) die "$a: unknown parameter (IMAGE, SRIOV_RESOURCE, SRIOV_NETWORK, TOKEN_SECRET)" ;;
	*) [ -z "$file" ] || die "$a: one file at a time"; file=$a ;;
	esac
done
[ -n "$file" ] || die "usage: render.sh [NAME=VALUE...] FILE.yaml"
[ -r "$file" ] || die "$file: cannot read"
# The shapes Kubernetes accepts: an image reference without spaces or quotes, an extended
# resource domain/name, DNS labels for the network and the Secret.
echo "$image" | grep -qE '^[A-Za-z0-9][A-Za-z0-9._/:@-]*$' || die "IMAGE=$image: not an image reference"
echo "$resource" | grep -qE '^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$' ||
	die "SRIOV_RESOURCE=$resource: expected DOMAIN/NAME (e.g. intel.com/sriov)"
for v in "SRIOV_NETWORK=$network" "TOKEN_SECRET=$secret"; do
	echo "${v#*=}" | grep -qE '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' || die "$v: not a DNS label"
done
sed -e "s|image: wharf:[0-9][0-9.]*|image: $image|" -e "s|intel\.com/sriov|$resource|g" \
	-e "s|wharf-sriov|$network|g" -e "s|wharf-ctl-token|$secret|g" "$file"
