#include "service/goaway.h"

#include "grpcpp/version_info.h"

#if GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51
#include <memory>

#include "absl/synchronization/notification.h"
#include "grpc/grpc.h"

// The two member functions of gRPC 1.51's core server used here, declared
// as libgrpc.so.29 exports them (grpc_core::Server in
// src/core/lib/surface/server.h of gRPC 1.51.1). Only their names and
// signatures matter: they are called, never inlined, and the class is not
// used otherwise.
namespace grpc_core {
class Server {
 public:
  void StopListening();
  void SendGoaways();
};
}  // namespace grpc_core

namespace chunkd::service {
namespace {

// The shutdown callback of a callback completion queue, which gRPC runs
// inside its core's execution context: there it stops the listener and
// sends the GOAWAYs. `done` is shared, so that the waiting thread may go on
// (and this task be freed) while Notify() is still returning.
struct GoAwayTask : grpc_completion_queue_functor {
  grpc_core::Server* core = nullptr;
  std::shared_ptr<absl::Notification> done =
      std::make_shared<absl::Notification>();

  static void Run(grpc_completion_queue_functor* functor, int /*ok*/) {
    auto* task = static_cast<GoAwayTask*>(functor);
    const std::shared_ptr<absl::Notification> done = task->done;
    task->core->StopListening();
    task->core->SendGoaways();
    done->Notify();
  }
};

}  // namespace

bool GoAway(grpc::Server& server) {
  GoAwayTask task;
  task.functor_run = &GoAwayTask::Run;
  task.inlineable = 0;
  // In gRPC 1.51 a grpc_server is the core Server itself (CppImplOf
  // reinterprets one pointer as the other).
  task.core = reinterpret_cast<grpc_core::Server*>(server.c_server());
  const std::shared_ptr<absl::Notification> done = task.done;
  grpc_completion_queue* cq =
      grpc_completion_queue_create_for_callback(&task, nullptr);
  grpc_completion_queue_shutdown(cq);  // no operation is pending: runs Run
  done->WaitForNotification();
  grpc_completion_queue_destroy(cq);
  return true;
}

}  // namespace chunkd::service

#else

namespace chunkd::service {

bool GoAway(grpc::Server& /*server*/) { return false; }

}  // namespace chunkd::service

#endif
