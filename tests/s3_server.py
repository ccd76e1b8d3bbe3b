"""A real S3-protocol server on 127.0.0.1 for the tests: moto's server mode
(``moto[server]``, in the ``test`` extra), started in a thread of the test process.

Clients reach it the way a user reaches MinIO or any S3-compatible store: the standard
AWS environment variables (credentials, region) and ``AWS_ENDPOINT_URL``, which botocore
(so boto3, s3fs through aiobotocore, the AWS CLI and TensorBoard's own S3 reader) honours.
Nothing else is configured in code, so subprocesses (``tb-profiler``) inherit the same
setup. The user's ~/.aws files and the EC2 metadata service are kept out: nothing but
127.0.0.1 is ever contacted.
"""
from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator

# What each test process points the AWS SDKs at; the endpoint is added when the server runs.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",        # never ask 169.254.169.254 for credentials
    "AWS_CONFIG_FILE": os.devnull,              # the user's ~/.aws/config has no say
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,  # nor ~/.aws/credentials
}
UNSET = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_REGION",
         "FSSPEC_S3", "FSSPEC_S3_ENDPOINT_URL")


def forget_s3_filesystems() -> None:
    """Drop fsspec's cached S3 filesystems (they keep their endpoint and listings for the
    life of the process): the next one is made from the environment as it is now."""
    import fsspec

    fsspec.get_filesystem_class("s3").clear_instance_cache()


@contextlib.contextmanager
def s3_server(monkeypatch) -> Iterator[str]:
    """Run moto's S3 server on a free port of 127.0.0.1 with the environment pointing at it;
    yields its endpoint URL. monkeypatch (a pytest.MonkeyPatch) undoes the environment."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        get = getattr(server, "get_host_and_port", None)  # moto >= 5.0.x; else the socket's own address
        host, port = get() if get else server._server.server_address[:2]
        endpoint = f"http://{host}:{port}"
        for name in UNSET:
            monkeypatch.delenv(name, raising=False)
        for name, value in {**AWS_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(name, value)
        forget_s3_filesystems()
        yield endpoint
    finally:
        forget_s3_filesystems()
        server.stop()
