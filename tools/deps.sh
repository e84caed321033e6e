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
# moto's S3 server for the archive store's test (t_execd_s3: it checks
# SigV4 signatures), from Debian where it is packaged; Debian 12 does
# not (the test skips without it, README "More than one host").
if ! python3 -c 'import moto.server, boto3' >/dev/null 2>&1 &&
	apt-cache show python3-moto >/dev/null 2>&1; then
	apt-get install -y -qq --no-install-recommends python3-moto \
		python3-boto3 python3-flask python3-flask-cors >/dev/null
fi
