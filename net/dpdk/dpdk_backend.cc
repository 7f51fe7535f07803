// The `dpdk` network backend: the process's DpdkStack (EAL, port, lwIP), polled by reactor 0
// (or, before the broker's reactors exist, by the short-lived boot reactor); every reactor's
// transport and every outbound connection run over it. Its counters are samsa_dpdk_* metrics,
// its device and queues are in `samsactl status`, and a line of them goes to the log.
#include <cstdio>

#include "net/backend.h"
#include "net/dpdk/dpdk_transport.h"

namespace samsa::net {
namespace {

std::string stats_text(const DpdkStats& s) {
  char b[512];
  const double busy = s.poll_total_ns ? 100.0 * static_cast<double>(s.poll_busy_ns) /
                                            static_cast<double>(s.poll_total_ns)
                                      : 0.0;
  std::snprintf(
      b, sizeof b,
      "rx %llu packets %llu bytes, tx %llu packets %llu bytes (%llu without a copy), dropped "
      "rx %llu tx %llu "
      "ip %llu (bad checksum %llu), tcp retransmits %llu, connections %llu (half-open %llu, "
      "accepted %llu, "
      "outbound %llu, "
      "resets received %llu, half-open dropped %llu), poll busy %.1f%%, sleeps %llu, mbufs "
      "free %u/%u",
      static_cast<unsigned long long>(s.rx_packets), static_cast<unsigned long long>(s.rx_bytes),
      static_cast<unsigned long long>(s.tx_packets), static_cast<unsigned long long>(s.tx_bytes),
      static_cast<unsigned long long>(s.tx_zero_copy_bytes),
      static_cast<unsigned long long>(s.rx_dropped), static_cast<unsigned long long>(s.tx_dropped),
      static_cast<unsigned long long>(s.ip_dropped),
      static_cast<unsigned long long>(s.rx_bad_checksum),
      static_cast<unsigned long long>(s.tcp_retransmits),
      static_cast<unsigned long long>(s.tcp_connections),
      static_cast<unsigned long long>(s.tcp_half_open),
      static_cast<unsigned long long>(s.tcp_accepted),
      static_cast<unsigned long long>(s.tcp_connects),
      static_cast<unsigned long long>(s.tcp_resets_received),
      static_cast<unsigned long long>(s.tcp_syn_dropped), busy,
      static_cast<unsigned long long>(s.sleeps), s.mbufs_free, s.mbufs_total);
  return b;
}

class DpdkBackend final : public Backend {
 public:
  explicit DpdkBackend(std::unique_ptr<DpdkStack> s) : stack_(std::move(s)) {}
  const char* name() const override { return "dpdk"; }
  bool address_free(const std::string&, std::uint16_t, std::string*) const override {
    return true;  // the stack's address is its own
  }
  void attach(std::size_t index, io::Reactor& r) override {
    if (polls(index)) stack_->attach(r);
  }
  void detach(std::size_t index) override {
    if (polls(index)) stack_->detach();
  }
  std::unique_ptr<Transport> make_transport(io::Reactor& r, FrameHandler& h) override {
    return DpdkTransport::create(r, h, *stack_);
  }
  ClientFactory client_factory() override { return stack_->client_factory(); }
  std::string stats_line() const override { return "dpdk: " + stats_text(stack_->stats()); }
  std::uint64_t traffic() const override {
    const DpdkStats st = stack_->stats();
    return st.rx_packets + st.tx_packets;
  }
  std::string summary() const override {
    const DpdkInfo i = stack_->info();
    return "; dpdk " + i.device + " (" + i.driver + ")" +
           (i.interface.empty() ? "" : " on " + i.interface) + " as " + i.ip + ", " +
           std::to_string(i.rx_queues) + "/" + std::to_string(i.tx_queues) +
           " rx/tx queues polled by " + i.polled_by;
  }
  BackendStatus status() const override;
  void write_metrics(MetricSink& sink) const override;

 private:
  // The device is polled by reactor 0, or by the boot reactor before the broker's exist.
  static bool polls(std::size_t index) { return index == 0 || index == kBootReactor; }
  std::unique_ptr<DpdkStack> stack_;
};

BackendStatus DpdkBackend::status() const {
  const DpdkInfo d = stack_->info();
  const DpdkStats st = stack_->stats();
  BackendStatus out;
  out.fields = {{"device", d.device},
                {"driver", d.driver},
                {"interface", d.interface},
                {"ip", d.ip},
                {"mac", d.mac},
                {"mtu", std::int64_t{d.mtu}},
                {"rx_queues", std::int64_t{d.rx_queues}},
                {"tx_queues", std::int64_t{d.tx_queues}},
                {"polled_by", d.polled_by},
                {"tcp_connections", static_cast<std::int64_t>(st.tcp_connections)}};
  const double busy = st.poll_total_ns ? static_cast<double>(st.poll_busy_ns) /
                                             static_cast<double>(st.poll_total_ns)
                                       : 0.0;
  out.fields.emplace_back("poll_busy_ratio", busy);
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100 * busy);
  out.rows = {{"dpdk", d.device + " (" + d.driver + ") on " + d.interface + ", " + d.ip + " mac " +
                           d.mac + " mtu " + std::to_string(d.mtu)},
              {"dpdk queues", std::to_string(d.rx_queues) + "/" + std::to_string(d.tx_queues) +
                                  " rx/tx, polled by " + d.polled_by + ", " +
                                  std::to_string(st.tcp_connections) +
                                  " TCP connections, poll busy " + pct}};
  return out;
}

void DpdkBackend::write_metrics(MetricSink& sink) const {
  const DpdkStats d = stack_->stats();

  auto counter = [&sink](const char* name, const char* help, std::uint64_t v) {
    sink.family(name, "counter", help);
    sink.sample(name, static_cast<double>(v));
  };
  auto gauge = [&sink](const char* name, const char* help, std::uint64_t v) {
    sink.family(name, "gauge", help);
    sink.sample(name, static_cast<double>(v));
  };
  counter("samsa_dpdk_rx_packets_total", "Frames the DPDK device received.", d.rx_packets);
  counter("samsa_dpdk_rx_bytes_total", "Bytes the DPDK device received.", d.rx_bytes);
  counter("samsa_dpdk_tx_packets_total", "Frames the DPDK device sent.", d.tx_packets);
  counter("samsa_dpdk_tx_bytes_total", "Bytes the DPDK device sent.", d.tx_bytes);
  counter("samsa_dpdk_tx_zero_copy_bytes_total",
          "Payload bytes sent from kept answers without a copy into packet buffers.",
          d.tx_zero_copy_bytes);
  sink.family("samsa_dpdk_dropped_packets_total", "counter",
              "Frames dropped: rx (device ring full, no mbuf, errors), tx (ring full too long, no "
              "mbuf, errors), ip (not for us, bad header or checksum).");
  sink.sample("samsa_dpdk_dropped_packets_total", static_cast<double>(d.rx_dropped), "where", "rx");
  sink.sample("samsa_dpdk_dropped_packets_total", static_cast<double>(d.tx_dropped), "where", "tx");
  sink.sample("samsa_dpdk_dropped_packets_total", static_cast<double>(d.ip_dropped), "where", "ip");
  counter("samsa_dpdk_rx_bad_checksum_total",
          "Frames dropped for a bad IP or TCP checksum, among them a peer's unfilled ones "
          "(transmit checksum offload on a veth peer: the log says the command).",
          d.rx_bad_checksum);
  counter("samsa_dpdk_tcp_retransmits_total", "TCP segments the stack sent again.",
          d.tcp_retransmits);
  gauge("samsa_dpdk_tcp_connections", "TCP connections of the stack (established or closing).",
        d.tcp_connections);
  gauge("samsa_dpdk_tcp_half_open", "TCP connections between SYN and handshake's end.",
        d.tcp_half_open);
  counter("samsa_dpdk_tcp_half_open_dropped_total",
          "Half-open connections dropped because a listener's backlog was nearly full.",
          d.tcp_syn_dropped);
  counter("samsa_dpdk_tcp_accepted_total", "TCP connections accepted.", d.tcp_accepted);
  counter("samsa_dpdk_tcp_probes_total",
          "Probes sent to end the connections a killed predecessor held (each answered with a "
          "reset, so their clients reconnect).",
          d.tcp_probes);
  counter("samsa_dpdk_tcp_connects_total",
          "Outbound TCP connections attempted (replication fetchers).", d.tcp_connects);
  counter("samsa_dpdk_tcp_resets_received_total", "TCP resets received.", d.tcp_resets_received);
  sink.family("samsa_dpdk_poll_busy_seconds_total", "counter",
              "Time the poll loop spent in polls that found work (busy ratio: its rate over "
              "samsa_dpdk_poll_seconds_total's).");
  sink.sample("samsa_dpdk_poll_busy_seconds_total", static_cast<double>(d.poll_busy_ns) * 1e-9);
  sink.family("samsa_dpdk_poll_seconds_total", "counter", "Time since the poll loop started.");
  sink.sample("samsa_dpdk_poll_seconds_total", static_cast<double>(d.poll_total_ns) * 1e-9);
  counter("samsa_dpdk_poll_sleeps_total", "Times the idle poll loop went to sleep.", d.sleeps);
  gauge("samsa_dpdk_mbufs_free", "Free packet buffers in the DPDK pool.", d.mbufs_free);
}

}  // namespace

std::expected<std::unique_ptr<Backend>, std::string> make_dpdk_backend(const DpdkOptions& o) {
  auto stack = DpdkStack::create(o);
  if (!stack) return std::unexpected(stack.error());
  return std::make_unique<DpdkBackend>(std::move(*stack));
}

}  // namespace samsa::net
