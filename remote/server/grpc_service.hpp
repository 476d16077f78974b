// grpc_service.hpp: remote.proto's Remote service over service_core. Each
// method reads the metadata, hands over to the core and returns its status;
// the streams (Lifeline, SetTensor, GetTensor) are driven here.
#pragma once

#include <chrono>

#include "remote.grpc.pb.h"
#include "service_core.hpp"
#include "stream_watchdog.hpp"

namespace bp::remote::server {

class grpc_service final : public pb::Remote::Service {
 public:
  // |stream_idle|: how long SetTensor and GetTensor may wait for their peer
  // before they end with DEADLINE_EXCEEDED (0: no limit).
  grpc_service(service_core &core, std::chrono::milliseconds heartbeat, std::chrono::milliseconds stream_idle)
      : core_(core), heartbeat_(heartbeat), watchdog_(stream_idle) {}

  grpc::Status Hello(grpc::ServerContext *c, const pb::HelloRequest *q, pb::HelloReply *r) override;
  grpc::Status Lifeline(grpc::ServerContext *c, const pb::LifelineRequest *q,
                        grpc::ServerWriter<pb::Heartbeat> *w) override;
  grpc::Status Goodbye(grpc::ServerContext *c, const pb::GoodbyeRequest *q, pb::Empty *r) override;
  grpc::Status DeviceMemory(grpc::ServerContext *c, const pb::DeviceRef *q, pb::DeviceMemoryReply *r) override;
  grpc::Status BackendOpen(grpc::ServerContext *c, const pb::BackendOpenRequest *q, pb::Handle *r) override;
  grpc::Status BackendFree(grpc::ServerContext *c, const pb::Handle *q, pb::Empty *r) override;
  grpc::Status BackendSynchronize(grpc::ServerContext *c, const pb::Handle *q, pb::Empty *r) override;
  grpc::Status SupportsOp(grpc::ServerContext *c, const pb::SupportsOpRequest *q, pb::SupportsOpReply *r) override;
  grpc::Status BufferAlloc(grpc::ServerContext *c, const pb::BufferAllocRequest *q, pb::BufferAllocReply *r) override;
  grpc::Status BufferFree(grpc::ServerContext *c, const pb::Handle *q, pb::Empty *r) override;
  grpc::Status BufferClear(grpc::ServerContext *c, const pb::BufferClearRequest *q, pb::Empty *r) override;
  grpc::Status BufferMemset(grpc::ServerContext *c, const pb::BufferMemsetRequest *q, pb::Empty *r) override;
  grpc::Status SetTensor(grpc::ServerContext *c, grpc::ServerReader<pb::SetTensorChunk> *rd, pb::Empty *r) override;
  grpc::Status GetTensor(grpc::ServerContext *c, const pb::GetTensorRequest *q,
                         grpc::ServerWriter<pb::DataChunk> *w) override;
  grpc::Status CopyBuffer(grpc::ServerContext *c, const pb::CopyBufferRequest *q, pb::Empty *r) override;
  grpc::Status GraphRegister(grpc::ServerContext *c, const pb::GraphRegisterRequest *q, pb::Handle *r) override;
  grpc::Status GraphCompute(grpc::ServerContext *c, const pb::GraphComputeRequest *q,
                            pb::GraphComputeReply *r) override;
  grpc::Status GraphFree(grpc::ServerContext *c, const pb::Handle *q, pb::Empty *r) override;

 private:
  service_core &core_;
  std::chrono::milliseconds heartbeat_;
  stream_watchdog watchdog_;
};

}  // namespace bp::remote::server
