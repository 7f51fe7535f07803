// What a cluster's controller node serves on its controller listener: BrokerRegistration,
// BrokerHeartbeat, AlterPartition and AllocateProducerIds (the quorum's own RPCs and the Fetch
// of __cluster_metadata are quorum_apis.cc's). Each goes to the controller thread; the answers
// come back on the request's reactor.
// A broker node forwards topic and config changes to the controller (forward()).
#include <algorithm>

#include "base/log.h"
#include "daemon/api/envelope.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "daemon/broker.h"
#include "net/kafka/gen/allocate_producer_ids_request.h"
#include "net/kafka/gen/allocate_producer_ids_response.h"
#include "net/kafka/gen/alter_partition_request.h"
#include "net/kafka/gen/alter_partition_response.h"
#include "net/kafka/gen/broker_heartbeat_request.h"
#include "net/kafka/gen/broker_heartbeat_response.h"
#include "net/kafka/gen/broker_registration_request.h"
#include "net/kafka/gen/broker_registration_response.h"
#include "replication/cluster_wire.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

}  // namespace

void broker_registration(RequestPtr r) {
  kafka::BrokerRegistrationRequest req;
  if (!r->decode(req)) return;
  if (req.cluster_id != r->rc.settings->cluster_id) {
    LOG_WARN("broker %d registers for cluster %s, this is cluster %s: refused", req.broker_id,
             req.cluster_id.c_str(), r->rc.settings->cluster_id.c_str());
    r->reply(replication::registration_response({ErrorCode::inconsistent_cluster_id, -1}));
    return;
  }
  via_controller<replication::RegistrationAnswer>(
      std::move(r),
      [reg = replication::registration_of(req)](replication::Controller& c, auto done) {
        c.register_broker(reg, std::move(done));
      },
      [](RequestPtr r, replication::RegistrationAnswer a) {
        r->reply(replication::registration_response(a));
      });
}

void broker_heartbeat(RequestPtr r) {
  kafka::BrokerHeartbeatRequest req;
  if (!r->decode(req)) return;
  via_controller<replication::HeartbeatAnswer>(
      std::move(r),
      [hb = replication::heartbeat_of(req)](replication::Controller& c, auto done) {
        c.broker_heartbeat(hb, std::move(done));
      },
      [](RequestPtr r, replication::HeartbeatAnswer a) {
        r->reply(replication::heartbeat_response(a));
      });
}

// A partition leader's ISR changes (replication/isr_keeper.h). v2 names members without their
// broker epochs (not checked then); v3 with them.
void alter_partition(RequestPtr r) {
  kafka::AlterPartitionRequest req;
  if (!r->decode(req)) return;
  auto items = replication::alter_partition_items(req, r->version());
  std::vector<std::pair<replication::Uuid, std::int32_t>> keys;
  keys.reserve(items.size());
  for (const auto& it : items)
    keys.emplace_back(it.topic_id, it.partition);
  via_controller<std::vector<replication::AlterPartitionAnswer>>(
      std::move(r),
      [items = std::move(items)](replication::Controller& c, auto done) mutable {
        c.alter_partition(std::move(items), std::move(done));
      },
      [keys = std::move(keys)](RequestPtr r, std::vector<replication::AlterPartitionAnswer> a) {
        kafka::AlterPartitionResponse resp;
        for (std::size_t i = 0; i < keys.size() && i < a.size(); ++i)
          replication::add_alter_partition_answer(resp, keys[i].first, keys[i].second, a[i]);
        r->reply(resp);
      });
}

// A broker node's group coordinator reserves producer ids here (every broker hands out ids from
// blocks the controller reserved durably, so they never repeat across the cluster). A broker
// that is not registered with the epoch it sends gets STALE_BROKER_EPOCH, as from Kafka.
void allocate_producer_ids(RequestPtr r) {
  kafka::AllocateProducerIdsRequest req;
  if (!r->decode(req)) return;
  via_controller<replication::ProducerIdsAnswer>(
      std::move(r),
      [id = req.broker_id, epoch = req.broker_epoch](replication::Controller& c, auto done) {
        c.allocate_producer_ids(id, epoch, std::move(done));
      },
      [](RequestPtr r, replication::ProducerIdsAnswer a) {
        kafka::AllocateProducerIdsResponse resp;
        resp.error_code = kafka::code(a.error);
        resp.producer_id_start = a.first;
        resp.producer_id_len = a.length;
        r->reply(resp);
      });
}

void forward(RequestPtr r) {
  Broker& b = *r->rc.broker;
  const std::size_t origin = r->rc.index;
  const std::int32_t correlation = r->correlation_id();
  std::vector<std::byte> frame = envelope_frame(*r);
  Request* raw = r.release();
  b.forward_to_controller(
      std::move(frame), [&b, origin, raw, correlation](std::optional<std::vector<std::byte>> resp) {
        b.on_reactor(origin, [raw, correlation, resp = std::move(resp)](ReactorContext&) mutable {
          RequestPtr r(raw);
          if (resp) resp = envelope_answer(*resp);
          if (!resp || resp->size() < 4) {
            r->fail("the controller could not be reached to forward the request");
            return;
          }
          // The controller's answer, under the client's correlation id.
          net::Buffer out(resp->size() + 4);
          const auto n = static_cast<std::uint32_t>(resp->size());
          const std::uint32_t c = static_cast<std::uint32_t>(correlation);
          std::byte* d = out.data();
          for (int i = 0; i < 4; ++i) {
            d[i] = static_cast<std::byte>(n >> (24 - 8 * i));
            d[4 + i] = static_cast<std::byte>(c >> (24 - 8 * i));
          }
          std::copy(resp->begin() + 4, resp->end(), d + 8);
          net::Response nr;
          nr.append(std::move(out));
          r->send(std::move(nr));
        });
      });
}

}  // namespace samsa::daemon::handlers
