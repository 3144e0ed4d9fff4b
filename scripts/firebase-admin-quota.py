"""The unmodified firebase-admin Python SDK meeting fanoutd's send quota (docs/http-api.md, "Quotas").

Usage: firebase-admin-quota.py BASE_URL API_KEY

Run by `make test` (FanoutCLITests, `theFirebaseAdminSDKMeetsTheDeviceQuota`) against a fanoutd
started with `--device-messages-per-minute 20`, where the Android token `sdk-quota` is registered
in `default`. The SDK's two HTTP clients meet the 429 as they meet FCM's: the async one (httpx,
`send_each_async`) does not retry a 429 and reports `QuotaExceededError`; the blocking one
(`send`, urllib3) waits the `Retry-After` it was given and retries. Prints `sent N` (the messages
that were accepted) for the caller to check against the deliveries queued.
"""

import asyncio
import json
import sys

import firebase_admin
from firebase_admin import messaging

sys.path.insert(0, __file__.rsplit("/", 1)[0])
flow = __import__("firebase-admin-flow")


async def send_until_refused():
    """Sends to `sdk-quota` until the device's quota refuses one (at most 100 times), with the
    SDK's async client (one event loop: the client keeps its connections on it)."""
    sent = 0
    for _ in range(100):
        batch = await messaging.send_each_async([messaging.Message(token="sdk-quota", data={"n": str(sent)})])
        response = batch.responses[0]
        if not response.success:
            return sent, response.exception
        sent += 1
    return sent, None


def main():
    base, key = sys.argv[1], sys.argv[2]
    app = firebase_admin.initialize_app(flow.fanoutd_credential(key), {"projectId": "default"})
    flow.point_at_fanoutd(app, base)

    sent, refused = asyncio.run(send_until_refused())
    assert refused is not None, "100 sends to one device and none refused"
    assert sent >= 20, f"refused after {sent} sends, before the burst of 20 was used"
    assert isinstance(refused, messaging.QuotaExceededError), f"{type(refused).__name__}: {refused}"
    assert refused.http_response.status_code == 429, refused.http_response.status_code
    retry_after = int(refused.http_response.headers["Retry-After"])
    assert 1 <= retry_after <= 3, f"Retry-After {retry_after}: one message of 20 a minute is due within 3 s"
    error = json.loads(refused.http_response.content)["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED", error
    kinds = {detail["@type"]: detail for detail in error["details"]}
    assert kinds["type.googleapis.com/google.firebase.fcm.v1.FcmError"]["errorCode"] == "QUOTA_EXCEEDED", error
    violation = kinds["type.googleapis.com/google.rpc.QuotaFailure"]["violations"][0]
    assert violation["subject"] == "message.token", violation

    # The blocking client waits the Retry-After it is given (urllib3 honours it on a 429) and
    # its retry gets through.
    name = messaging.send(messaging.Message(token="sdk-quota", data={"n": str(sent)}))
    assert name.startswith("projects/default/messages/"), name
    sent += 1

    print(f"sent {sent}")
    print("the quota answered as FCM answers")


if __name__ == "__main__":
    main()
