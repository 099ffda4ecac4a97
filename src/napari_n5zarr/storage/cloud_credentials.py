"""Public cloud data without configuration: anonymous S3 / GCS reads where there are no
credentials, and a hint when a bucket refuses the request.

The big public N5 collections (OpenOrganelle on S3, the Human Organ Atlas on GCS) are
readable anonymously, but s3fs and gcsfs sign every request with whatever credentials they
find and fail outright when they find none (``NoCredentialsError``). So, where the user's
``storage_options`` (and fsspec's own configuration, ``FSSPEC_S3_*`` / ``FSSPEC_GCS_*``)
say nothing about credentials, the standard lookups of the cloud's own library are asked
(botocore: environment, profile, container and instance metadata; google-auth: application
default credentials) and, when they find none, the store reads anonymously (said once per
process in the log). The endpoint is the libraries' own business (``AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

logger = logging.getLogger(__name__)

S3_SCHEMES = ("s3://", "s3a://")
GCS_SCHEMES = ("gs://", "gcs://")
_S3_CHOICES = frozenset(
    {"anon", "key", "secret", "token", "profile", "session", "username", "password"}
)
"""s3fs options by which a user already chose how to sign (or not)."""
_GCS_CHOICES = frozenset({"token"})


def with_anonymous_fallback(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` plus ``anon=True`` (S3) / ``token="anon"`` (GCS) when the user chose
    nothing and no credentials are found; otherwise ``options`` unchanged."""
    if url.startswith(S3_SCHEMES):
        if _chosen("s3", options, _S3_CHOICES) or _aws_credentials_found(options.get("profile")):
            return options
        _say_anonymous("AWS")
        return {**options, "anon": True}
    if url.startswith(GCS_SCHEMES):
        if _chosen("gcs", options, _GCS_CHOICES) or _gcs_credentials_found():
            return options
        _say_anonymous("Google Cloud")
        return {**options, "token": "anon"}
    return options


def is_anonymous(fs: Any) -> bool:
    """Whether an s3fs / gcsfs filesystem sends unsigned requests."""
    return (
        bool(getattr(fs, "anon", False))
        or getattr(getattr(fs, "credentials", None), "method", None) == "anon"
    )


def refused_hint(url: str, fs: Any) -> str:
    """What to try when an S3 / GCS bucket answers 401/403 ("" for other URLs)."""
    if url.startswith(S3_SCHEMES):
        if is_anonymous(fs):
            return ("; the bucket is not public (read anonymously, as no AWS credentials were found): "
                    "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")  # fmt: skip
        return ("; the bucket refused your AWS credentials: for a public bucket try "
                "--storage-options '{\"anon\": true}' (storage_options={\"anon\": True}), "
                "else check AWS_PROFILE / AWS_ACCESS_KEY_ID")  # fmt: skip
    if url.startswith(GCS_SCHEMES):
        if is_anonymous(fs):
            return ("; the bucket is not public (read anonymously, as no Google credentials were found): "
                    "run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS")  # fmt: skip
        return ("; the bucket refused your Google credentials: for a public bucket try "
                "--storage-options '{\"token\": \"anon\"}'")  # fmt: skip
    return ""


def _chosen(protocol: str, options: dict[str, Any], choices: frozenset[str]) -> bool:
    """Whether the user's options or fsspec's configuration for ``protocol`` already say how
    to authenticate."""
    import fsspec.config

    configured = fsspec.config.conf.get(protocol) or {}
    return any(key in options or key in configured for key in choices)


@functools.cache
def _aws_credentials_found(profile: str | None) -> bool:
    """botocore's own credential chain (environment, shared files, SSO, container, instance
    metadata) finds something. Asked once per process and profile: the instance-metadata
    probe costs up to a second off EC2."""
    try:
        import botocore.session
    except ImportError:  # no s3fs either: opening the store says what to install
        return True
    try:
        return botocore.session.Session(profile=profile).get_credentials() is not None
    except Exception as e:  # a broken profile: let s3fs raise its own, clearer error
        logger.debug("AWS credential lookup failed: %s", e)
        return True


@functools.cache
def _gcs_credentials_found() -> bool:
    """google-auth's application default credentials exist (asked once per process)."""
    try:
        import google.auth
        import google.auth.exceptions
    except ImportError:  # no gcsfs either: opening the store says what to install
        return True
    try:
        google.auth.default()
    except google.auth.exceptions.DefaultCredentialsError:
        return False
    except Exception as e:  # a broken credentials file: let gcsfs raise its own error
        logger.debug("Google credential lookup failed: %s", e)
    return True


@functools.cache
def _say_anonymous(cloud: str) -> None:
    logger.info("no %s credentials found: reading anonymously (public data only)", cloud)
