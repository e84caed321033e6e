#!/bin/sh
# Installs what sluice needs to build and test on Debian 12 (run as root).
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
	build-essential autoconf automake pkg-config clang libclang-rt-14-dev \
	libevent-dev libc-ares-dev libjansson-dev libnftnl-dev libmnl-dev \
	libcmocka-dev libssl-dev libseccomp-dev \
	curl python3 python3-pip openssl mandoc procps iproute2 nftables \
	ca-certificates util-linux runsc systemd dpkg-dev \
	mmdebstrap erofs-utils \
	>/dev/null
