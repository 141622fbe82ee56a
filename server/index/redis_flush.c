#include "index/redis_flush.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

int chunkd_redis_flush(redisContext* context) {
  if (context->err != 0) return -1;
  while (context->obuf != NULL && sdslen(context->obuf) > 0) {
    const ssize_t n =
        send(context->fd, context->obuf, sdslen(context->obuf), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      context->err = REDIS_ERR_IO;
      snprintf(context->errstr, sizeof(context->errstr), "%s", strerror(errno));
      return -1;
    }
    sdsrange(context->obuf, (int)n, -1);
  }
  return 0;
}
