// GoAway: the first step of a drain, before grpc::Server::Shutdown
// (docs/design.md, "Threading model"): stop accepting connections and send
// every connection HTTP/2's graceful GOAWAY, while the server still serves
// every call that reaches it.
//
// Why not Shutdown alone: in gRPC 1.51, Server::Shutdown first marks the
// server as shutting down, then closes its listener and sends the GOAWAYs
// (a GOAWAY with the last stream id 2^31-1 and a PING; on the PING's ack a
// second GOAWAY naming the last stream taken). A call whose headers arrive
// after the mark, because its client had not yet read the GOAWAY, is ended
// by gRPC's core with CANCELLED before any handler sees it, and no client
// retries CANCELLED. GoAway does the listener and the GOAWAYs without the
// mark: such a call is served like any other, the client sends its next
// calls over its other connections, and a stream it opened past the second
// GOAWAY's id it sends elsewhere by itself (the server never saw it).
// Shutdown, called once the running streams are done, then finds no
// connection that still takes calls.
//
// How: gRPC's core has both steps, grpc_core::Server::StopListening and
// ::SendGoaways, which libgrpc.so.29 (gRPC 1.51) exports but no public
// header declares. Like every entry into the core they must run inside the
// core's execution context, which only the core can set up; the shutdown
// callback of a callback completion queue runs inside it (on one of gRPC's
// executor threads), so GoAway calls them from there and waits. This is
// compiled for gRPC 1.51 only; built against another gRPC, GoAway does
// nothing and returns false, and Shutdown alone drains.
//
// Thread safety: call it from the thread that later calls
// server.Shutdown(), before it does.
#ifndef CHUNKD_SERVICE_GOAWAY_H_
#define CHUNKD_SERVICE_GOAWAY_H_

#include "grpcpp/server.h"

namespace chunkd::service {

// Closes `server`'s listening sockets (a new connection is refused, so a
// client with several addresses turns to the others; one still in its
// handshake is dropped before it carried a call), then starts the graceful
// GOAWAY on every connection. Calls under way and calls that arrive before
// a connection's second GOAWAY are served as usual. True if done, false if
// this build cannot (see above).
// REQUIRES: `server` was started and not shut down; called at most once.
bool GoAway(grpc::Server& server);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_GOAWAY_H_
