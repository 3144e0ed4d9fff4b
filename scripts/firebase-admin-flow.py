"""The unmodified firebase-admin Python SDK against fanoutd's HTTP front (docs/http-api.md).

Usage: firebase-admin-flow.py BASE_URL API_KEY ANDROID_FID

Run by `make test` (FanoutCLITests, `theFirebaseAdminSDKSendsAndManagesTopics`) against a fanoutd
where these are registered in `default`: Android `sdk-android-1` (FID ANDROID_FID), iOS `sdk-ios-1`, and an
Android installation whose token `sdk-old` was rotated away. Each step asserts what the SDK
answers, exactly as it would answer against FCM; the deliveries it queued are checked by the
caller. Only the SDK's setup changes (the credential and the endpoint), none of its code.
"""

import sys

import firebase_admin
import google.auth.api_key
from firebase_admin import credentials, exceptions, messaging


def fanoutd_credential(key):
    """A fanoutd API key in the place of Google's OAuth token, as the README shows it: google-auth's
    own API-key credential, sent as `x-goog-api-key` (fanoutd also takes `Authorization: Bearer`)."""
    credential = credentials.Base()
    credential.get_credential = lambda: google.auth.api_key.Credentials(key)
    return credential


def point_at_fanoutd(app, base):
    """The SDK's endpoints (fcm.googleapis.com, and iid.googleapis.com for the legacy topic calls)
    replaced by fanoutd's, as the README shows it."""
    service = messaging._get_messaging_service(app)
    service._fcm_url = f"{base}/v1/projects/{app.project_id}/messages:send"
    service._fcm_topic_url = f"{base}/v1/projects/{app.project_id}/registrations"
    messaging._MessagingService.IID_URL = base


def expect_raises(error_type, call, what):
    try:
        call()
    except error_type as error:
        return error
    except Exception as error:  # noqa: BLE001 - the wrong exception is the failure being reported
        raise AssertionError(f"{what}: raised {type(error).__name__} ({error}), not {error_type.__name__}")
    raise AssertionError(f"{what}: raised nothing, not {error_type.__name__}")


def main():
    base, key, android_fid = sys.argv[1], sys.argv[2], sys.argv[3]
    app = firebase_admin.initialize_app(fanoutd_credential(key), {"projectId": "default"})
    point_at_fanoutd(app, base)

    # send to a token, and its dry run (nothing queued).
    name = messaging.send(messaging.Message(token="sdk-android-1", data={"step": "token"}))
    assert name.startswith("projects/default/messages/"), name
    dry = messaging.send(messaging.Message(token="sdk-android-1", data={"step": "dry"}), dry_run=True)
    assert dry == "projects/default/messages/fake_message_id", dry
    # firebase-admin 7 addresses an installation by its FID too.
    by_fid = messaging.send(messaging.Message(fid=android_fid, data={"step": "fid"}))
    assert by_fid.startswith("projects/default/messages/"), by_fid

    # Topic management, FCM v1 form, with a token nobody registered.
    subscribed = messaging.subscribe_to_topic(["sdk-android-1", "sdk-ios-1", "never-registered"], "news")
    assert (subscribed.success_count, subscribed.failure_count) == (2, 1), vars(subscribed)
    assert [(e.index, e.reason) for e in subscribed.errors] == [(2, "UNREGISTERED")], [(e.index, e.reason) for e in subscribed.errors]
    # The Instance ID form, as older SDKs use it.
    legacy = messaging.subscribe_to_topic_legacy(["sdk-android-1", "never-registered"], "/topics/legacy-news")
    assert (legacy.success_count, legacy.failure_count) == (1, 1), vars(legacy)
    assert legacy.errors[0].index == 1 and legacy.errors[0].reason == "NOT_FOUND", legacy.errors[0].reason

    # A topic and a condition: both installations.
    notification = messaging.Notification(title="Hello", body="from firebase-admin")
    messaging.send(messaging.Message(topic="news", notification=notification, data={"step": "topic"}))
    messaging.send(messaging.Message(condition="'news' in topics && !('sports' in topics)", data={"step": "condition"}))

    # send_each: one good, one rotated token.
    batch = messaging.send_each([
        messaging.Message(token="sdk-android-1", data={"step": "each"}),
        messaging.Message(token="sdk-old", data={"step": "each-old"}),
    ])
    assert (batch.success_count, batch.failure_count) == (1, 1), (batch.success_count, batch.failure_count)
    assert batch.responses[0].success and batch.responses[0].message_id.startswith("projects/default/messages/")
    assert isinstance(batch.responses[1].exception, messaging.UnregisteredError), repr(batch.responses[1].exception)

    # The exceptions FCM's answers raise.
    expect_raises(messaging.UnregisteredError, lambda: messaging.send(messaging.Message(token="sdk-old", data={"k": "v"})), "a rotated token")
    big = messaging.Message(
        token="sdk-ios-1",
        apns=messaging.APNSConfig(payload=messaging.APNSPayload(aps=messaging.Aps(alert="hi"), filler="x" * 4100)),
    )
    expect_raises(exceptions.InvalidArgumentError, lambda: messaging.send(big), "a 4097-byte APNs body")
    expect_raises(exceptions.InvalidArgumentError, lambda: messaging.send(messaging.Message(topic="news", data={"from": "x"})), "a reserved data key")

    # Unsubscribing: the iOS installation leaves; the unknown token is refused.
    left = messaging.unsubscribe_from_topic(["sdk-ios-1", "never-registered"], "news")
    assert (left.success_count, left.failure_count) == (1, 1), vars(left)
    messaging.send(messaging.Message(topic="news", data={"step": "after-unsubscribe"}))

    # A wrong key.
    stranger = firebase_admin.initialize_app(fanoutd_credential("not-a-key"), {"projectId": "default"}, name="stranger")
    point_at_fanoutd(stranger, base)
    expect_raises(exceptions.UnauthenticatedError, lambda: messaging.send(messaging.Message(topic="news"), app=stranger), "a wrong key")

    print("firebase-admin flow: all steps answered as FCM answers them")


if __name__ == "__main__":
    main()
