# The inferwatch image the rendered manifests and the compose stack run (exporters, the front door, doctor).
#   docker build -t REGISTRY/inferwatch:0.1.0 . && docker push REGISTRY/inferwatch:0.1.0
# then set `image:` in deploy.yaml to that tag (or its digest): see deploy/README.md.
#
# Hardened for the manifests' securityContext: a numeric non-root user (65532, the runAsUser they set),
# nothing written at run time (no .pyc, no pip cache), so a read-only root filesystem works; no build tools
# in the final stage. Pin the base by digest in your registry mirror if you can (docker buildx imagetools
# inspect python:3.11.10-slim-bookworm).

FROM python:3.11.10-slim-bookworm AS build
# the extras the image carries (pyproject.toml: one per role): by default those of every command the rendered
# manifests and the compose stack run: the normalizing exporter, the front door with its OTLP export, the GPU
# exporter, the simulator; no pandas, matplotlib or grafanalib. An image for one role takes only its own, e.g.
# --build-arg EXTRAS=exporter (the normalizing exporter alone); EXTRAS= is the core (normalize, doctor, slo)
ARG EXTRAS=exporter,frontdoor,gpu,sim,otel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY . .
RUN python -m venv /opt/inferwatch \
 && /opt/inferwatch/bin/pip install ".${EXTRAS:+[$EXTRAS]}" \
 && /opt/inferwatch/bin/python -m compileall -q /opt/inferwatch

FROM python:3.11.10-slim-bookworm
LABEL org.opencontainers.image.title="inferwatch" \
      org.opencontainers.image.description="Observability and SLOs for self-hosted LLM inference" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/inferwatch/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/inferwatch /opt/inferwatch
USER 65532:65532
ENTRYPOINT ["inferwatch"]
CMD ["--help"]
