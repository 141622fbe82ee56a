/* Writing a hiredis context's output buffer without SIGPIPE.
 *
 * hiredis 0.14 writes with write(2): on a connection the server has closed
 * that raises SIGPIPE, whose default action kills the process. This writes
 * with send(2, MSG_NOSIGNAL) instead. C, because hiredis 0.14's sds.h (the
 * output buffer's type) has no extern "C" of its own.
 *
 * Thread safety: one context, one thread. */
#ifndef CHUNKD_INDEX_REDIS_FLUSH_H_
#define CHUNKD_INDEX_REDIS_FLUSH_H_

#include <hiredis/hiredis.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sends the whole output buffer. 0 on success; -1 on an I/O error, with
 * context->err = REDIS_ERR_IO and context->errstr set (a timeout reads
 * "Resource temporarily unavailable", as hiredis' own errors do). */
int chunkd_redis_flush(redisContext* context);

#ifdef __cplusplus
}
#endif

#endif /* CHUNKD_INDEX_REDIS_FLUSH_H_ */
