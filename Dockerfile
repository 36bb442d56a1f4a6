# waitfor as a container image, e.g. for Kubernetes initContainers: a FROM-scratch image with
# Debian's python3, only the standard-library modules and shared libraries waitfor can use,
# compiled bytecode, the CA bundle and user 65532. No shell, no package manager.
#
# Production: docker build -t waitfor .   (from the official Debian image)
# Where no registry is reachable, images/build runs this same file FROM a Debian base made with
# debootstrap and installs from a wheelhouse prepared on the host
# (PIP_INSTALL_ARGS="--no-index --find-links ..."). Only where the base comes from differs.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ARG PIP_INSTALL_ARGS=""
# The official image has no Python; the local base comes with these installed (and no network).
# binutils: images/rootfs.py strips a wheel's shared object that still has its symbol table.
RUN if [ "$(dpkg-query -W -f='${db:Status-Status} ' python3 python3-venv ca-certificates binutils 2>/dev/null)" \
        != "installed installed installed installed " ]; then \
        apt-get update -qq \
     && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            python3 python3-venv ca-certificates binutils; \
    fi
COPY . /src
# One virtual environment holds waitfor and its runtime dependencies; pip itself is dropped.
# images/rootfs.py then assembles the final image's whole filesystem in /rootfs.
RUN python3 -m venv /opt/waitfor \
 && /opt/waitfor/bin/python -m pip install --no-cache-dir --disable-pip-version-check \
        ${PIP_INSTALL_ARGS} /src \
 && /opt/waitfor/bin/python -m pip uninstall --yes --quiet pip setuptools \
 && python3 /src/images/rootfs.py /opt/waitfor /rootfs

FROM scratch
ARG VERSION=0.1.0
# Release builds pass the repository's URL: docker build --build-arg SOURCE_URL=... .
ARG SOURCE_URL=unknown
LABEL org.opencontainers.image.title="waitfor" \
      org.opencontainers.image.description="Wait until dependencies (TCP, HTTP, PostgreSQL, DNS, ...) are really ready" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /rootfs /
# Unbuffered: progress lines reach `kubectl logs` at once. All bytecode is compiled (and has no
# source beside it), so a read-only root filesystem costs no start-up time; C.UTF-8 is glibc's own.
ENV PATH="/opt/waitfor/bin" \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
ENTRYPOINT ["waitfor"]
