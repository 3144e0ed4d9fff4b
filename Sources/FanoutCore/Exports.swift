// The value types the engine's API speaks in (names, FIDs, tokens, statuses, errors) live in
// FanoutModel, which links no C library, so that the wire module and the client can use them
// without the engine. Importing FanoutCore brings them along.
@_exported public import FanoutModel
