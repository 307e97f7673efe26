// Noticing that the client of a non-streamed request has gone away while the engine works on
// it. The cpp-httplib of Debian 12 (0.11) does not hand a handler its socket nor say whether the
// connection is closed, so the socket is found among the process's descriptors by its two
// addresses (what httplib put in the Request), and probed without reading from it.
#pragma once

#include <httplib.h>

namespace ninfer::tools {

// The descriptor of the connection `req` arrived on, or -1 if it cannot be found (then a
// disconnect is simply not noticed).
int client_socket(const httplib::Request& req);

// Whether the peer has closed (or reset) the connection: its end of stream has arrived.
// A client that only shuts down its sending side looks the same; HTTP clients do not do that.
bool peer_closed(int fd);

} // namespace ninfer::tools
