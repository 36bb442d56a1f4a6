# waitfor as a container image, e.g. for Kubernetes initContainers.
#
# Production: a standard build from the official slim Python image:
#   docker build -t waitfor .
# Where no registry is reachable, images/build builds the same file FROM a locally made base and
# installs from a wheelhouse prepared on the host (PIP_INSTALL_ARGS="--no-index --find-links ...").
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS build
ARG PIP_INSTALL_ARGS=""
COPY . /src
# One virtual environment holds waitfor and its runtime dependencies; pip itself is dropped.
RUN python3 -m venv /opt/waitfor \
 && /opt/waitfor/bin/python -m pip install --no-cache-dir --disable-pip-version-check \
        ${PIP_INSTALL_ARGS} /src \
 && /opt/waitfor/bin/python -m pip uninstall --yes --quiet pip setuptools \
 && python3 -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/waitfor

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
# Release builds pass the repository's URL: docker build --build-arg SOURCE_URL=... .
ARG SOURCE_URL=unknown
LABEL org.opencontainers.image.title="waitfor" \
      org.opencontainers.image.description="Wait until dependencies (TCP, HTTP, PostgreSQL, DNS) are really ready" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/waitfor /opt/waitfor
# Unbuffered: progress lines reach `kubectl logs` at once. Bytecode was compiled above with
# unchecked hashes, so a read-only root filesystem costs no start-up time.
ENV PATH="/opt/waitfor/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
ENTRYPOINT ["waitfor"]
