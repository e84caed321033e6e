#!/bin/sh
# Installs what sluice needs to build and test on Debian 12 (run as root).
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
	build-essential autoconf automake pkg-config clang libclang-rt-14-dev \
	libevent-dev libc-ares-dev libjansson-dev libnftnl-dev libmnl-dev \
	libcmocka-dev libssl-dev libseccomp-dev libarchive-dev libcurl4-openssl-dev \
	curl python3 python3-pip openssl mandoc procps iproute2 nftables \
	ca-certificates util-linux e2fsprogs runsc systemd dpkg-dev strace \
	chromium chromium-driver python3-selenium python3-pytest python3-mypy \
	mmdebstrap erofs-utils git python3-yaml \
	>/dev/null
# Node 18+ for the JavaScript SDK's tests: Debian's, unless a newer one
# (with its own npm) is installed already.
command -v node >/dev/null 2>&1 ||
	apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
# The archive store's S3 server for t_execd_s3 and the archive bench:
# OpenStack Swift with its s3api middleware (it checks SigV4 signatures),
# which the test starts itself, all in one on loopback with its own
# configuration (tests/scenario/swift_s3.py); boto3 is the test's own
# client.  The packages enable no service that runs here: nothing
# listens until the test starts it.
apt-get install -y -qq --no-install-recommends swift swift-proxy \
	swift-account swift-container swift-object python3-swift \
	python3-boto3 >/dev/null
