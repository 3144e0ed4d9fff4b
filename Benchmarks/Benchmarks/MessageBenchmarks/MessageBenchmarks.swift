import Benchmark
import FanoutCore

// Parsing + validation + rendering of FCM v1 send bodies: a typical ~1 KB message (notification,
// data, android, apns, webpush) and a ~4 KB one (the same with 3 KB more data, to a token).
// Throughput is messages per second; MB/s = messages/s x the body size printed in the name.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(3)
    )

    for body in [MessageFixtures.typical, MessageFixtures.large] {
        Benchmark("Message.validateAndRender.\(body.count)B") { benchmark in
            let now = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)
            for _ in benchmark.scaledIterations {
                let request = try! MessageParser.parseSendRequest(body)
                // As `Engine.send` does: the message moved out of the request, not copied.
                blackHole(RenderedMessage((consume request).message, acceptedAt: now))
            }
        }
        Benchmark("Message.validate.\(body.count)B") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try! MessageParser.parseSendRequest(body))
            }
        }
    }
}

enum MessageFixtures {
    static let typicalText = #"""
        {"validate_only":false,"message":{"token":"dTxbVurMB3E:APA91bHlyoWjJKxBzYF4Z1Fz8mH6ZfmjqXjBc3aE7WzD2dVqkQxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "notification":{"title":"Your order has shipped","body":"Order #1234 is on its way and should arrive on Tuesday.","image":"https://cdn.example.com/img/order-1234.png"},
        "data":{"order_id":"1234","status":"shipped","carrier":"UPS","tracking":"1Z999AA10123456784","deeplink":"shop://orders/1234"},
        "android":{"priority":"high","ttl":"86400s","collapse_key":"order-1234","notification":{"channel_id":"orders","color":"#f45342","icon":"ic_stat_order","click_action":"OPEN_ORDER","tag":"order-1234","notification_priority":"PRIORITY_HIGH","visibility":"PRIVATE"}},
        "apns":{"headers":{"apns-priority":"10","apns-push-type":"alert","apns-collapse-id":"order-1234","apns-expiration":"1893456000"},
        "payload":{"aps":{"alert":{"title":"Your order has shipped","body":"Order #1234 is on its way."},"badge":1,"sound":"default","thread-id":"orders","category":"ORDER"}}},
        "webpush":{"headers":{"TTL":"86400","Urgency":"high"},"notification":{"icon":"https://cdn.example.com/icon.png","badge":"https://cdn.example.com/badge.png","tag":"order-1234"},"fcm_options":{"link":"https://shop.example.com/orders/1234"}},
        "fcm_options":{"analytics_label":"order_shipped"}}}
        """#
    static let typical = Array(typicalText.utf8)
    static let large: [UInt8] = {
        var text = typicalText
        let extra = (0..<30).map { #""extra_\#($0)":"\#(String(repeating: "v", count: 90))""# }.joined(separator: ",")
        text = text.replacingFirst(#""deeplink":"shop://orders/1234"}"#, with: #""deeplink":"shop://orders/1234",\#(extra)}"#)
        return Array(text.utf8)
    }()
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = self.range(of: target) else { return self }
        return self.replacingCharacters(in: range, with: replacement)
    }
}
