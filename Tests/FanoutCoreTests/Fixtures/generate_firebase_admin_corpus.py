#!/usr/bin/env python3
"""Writes the FCM v1 send bodies that firebase-admin (Python) produces, as test fixtures.

    pip install firebase-admin==7.7.0
    python3 Tests/FanoutCoreTests/Fixtures/generate_firebase_admin_corpus.py

Each file is exactly what `messaging.send(message, dry_run=...)` puts on the wire:
{"message": <_MessagingService.encode_message(message)>, "validate_only": ...}.
The Swift tests check that every one is accepted (and build the invalid side by mutation).
"""
import datetime
import json
import os

from firebase_admin import messaging
from firebase_admin.messaging import _MessagingService

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "firebase-admin")
TOKEN = "dTxbVurMB3E:APA91bHlyoWjJKxBzYF4Z1Fz8mH6ZfmjqXjBc3aE7WzD2dVqkQ" + "x" * 100
FID = "eWkQ0JhLD2hnwthI-tkvWz"

android_full = messaging.AndroidConfig(
    collapse_key="score_update",
    priority="high",
    ttl=datetime.timedelta(hours=1, milliseconds=500),
    restricted_package_name="com.example.app",
    data={"k": "v", "android_only": "1"},
    notification=messaging.AndroidNotification(
        title="Android title", body="Android body", icon="stock_ticker_update", color="#f45342",
        sound="default", tag="news", click_action="OPEN_ACTIVITY_1",
        body_loc_key="BODY_KEY", body_loc_args=["a", "b"], title_loc_key="TITLE_KEY", title_loc_args=["c"],
        channel_id="channel", image="https://example.com/image.png", ticker="ticker", sticky=True,
        event_timestamp=datetime.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=datetime.timezone.utc),
        local_only=True, priority="high", vibrate_timings_millis=[100, 200.5, 300],
        default_vibrate_timings=False, default_sound=True, default_light_settings=False,
        light_settings=messaging.LightSettings(color="#aabbccdd", light_on_duration_millis=200, light_off_duration_millis=300),
        visibility="public", notification_count=7, proxy="if_priority_lowered",
    ),
    fcm_options=messaging.AndroidFCMOptions(analytics_label="android-label"),
    direct_boot_ok=True,
    bandwidth_constrained_ok=True,
    restricted_satellite_ok=False,
)

apns_alert = messaging.APNSConfig(
    headers={"apns-priority": "10", "apns-push-type": "alert", "apns-collapse-id": "news", "apns-expiration": "1893456000"},
    payload=messaging.APNSPayload(
        aps=messaging.Aps(
            alert=messaging.ApsAlert(
                title="t", subtitle="s", body="b", loc_key="LK", loc_args=["x"], title_loc_key="TLK",
                title_loc_args=["y"], action_loc_key="ALK", launch_image="img.png",
                custom_data={"subtitle-loc-key": "SLK", "subtitle-loc-args": ["z"], "summary-arg": "arg"},
            ),
            badge=3,
            sound=messaging.CriticalSound("bingbong.aiff", critical=True, volume=0.5),
            category="NEWS",
            thread_id="thread-1",
            mutable_content=True,
            custom_data={"interruption-level": "time-sensitive"},
        ),
        custom_key="custom value",
    ),
    fcm_options=messaging.APNSFCMOptions(analytics_label="apns-label", image="https://example.com/i.png"),
)

apns_background = messaging.APNSConfig(
    headers={"apns-priority": "5", "apns-push-type": "background"},
    payload=messaging.APNSPayload(aps=messaging.Aps(content_available=True)),
)

webpush_full = messaging.WebpushConfig(
    headers={"TTL": "4500", "Urgency": "high", "Topic": "news"},
    data={"web": "1"},
    notification=messaging.WebpushNotification(
        title="Web title", body="Web body", icon="https://example.com/icon.png",
        actions=[messaging.WebpushNotificationAction("open", "Open", icon="https://example.com/open.png")],
        badge="https://example.com/badge.png", data={"any": "thing"}, direction="rtl",
        image="https://example.com/image.png", language="en", renotify=True, require_interaction=True,
        silent=False, tag="tag", timestamp_millis=1700000000000, vibrate=[100, 50, 100],
        custom_data={"custom": "value"},
    ),
    fcm_options=messaging.WebpushFCMOptions(link="https://example.com/landing"),
)

corpus = {
    "01-token-data": messaging.Message(token=TOKEN, data={"score": "850", "time": "2:45"}),
    "02-fid-notification": messaging.Message(fid=FID, notification=messaging.Notification(title="Hello", body="World")),
    "03-topic-prefixed": messaging.Message(topic="/topics/news", data={"CONFIG_STATE": "STALE"}),
    "04-condition": messaging.Message(
        condition="'stock-GOOG' in topics || 'industry-tech' in topics",
        notification=messaging.Notification(title="$GOOG up 1.43%", body="since open", image="https://example.com/a.png"),
    ),
    "05-android-full": messaging.Message(token=TOKEN, android=android_full),
    "06-apns-alert": messaging.Message(token=TOKEN, notification=messaging.Notification(title="t", body="b"), apns=apns_alert),
    "07-apns-background-rc": messaging.Message(topic="PUSH_RC", data={"CONFIG_STATE": "STALE"}, apns=apns_background),
    "08-webpush-full": messaging.Message(token=TOKEN, webpush=webpush_full),
    "09-everything": messaging.Message(
        topic="everything", data={"a": "b"}, notification=messaging.Notification(title="T", body="B"),
        android=messaging.AndroidConfig(priority="normal", ttl=0, collapse_key="c"),
        apns=messaging.APNSConfig(payload=messaging.APNSPayload(aps=messaging.Aps(sound="default", badge=0))),
        webpush=messaging.WebpushConfig(notification=messaging.WebpushNotification(title="w")),
        fcm_options=messaging.FCMOptions(analytics_label="label_1.0"),
    ),
    "10-android-ttl-float": messaging.Message(token=TOKEN, android=messaging.AndroidConfig(ttl=1.5)),
    "11-apns-string-alert": messaging.Message(
        token=TOKEN,
        apns=messaging.APNSConfig(payload=messaging.APNSPayload(aps=messaging.Aps(alert="plain alert", sound="default"))),
    ),
    "12-voip": messaging.Message(
        token=TOKEN,
        apns=messaging.APNSConfig(headers={"apns-push-type": "voip", "apns-priority": "10"},
                                  payload=messaging.APNSPayload(aps=messaging.Aps(alert="call"), caller="ana")),
    ),
}

os.makedirs(OUT, exist_ok=True)
for name, message in corpus.items():
    body = {"message": _MessagingService.encode_message(message), "validate_only": name.endswith("rc")}
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(body, f, indent=2, sort_keys=True)
        f.write("\n")
print(f"wrote {len(corpus)} fixtures to {OUT}")
