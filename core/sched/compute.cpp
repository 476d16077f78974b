// compute.cpp: running the splits of an allocated graph.
//
// For each split, in order: copy its inputs into the split's backend, then
// start the split's nodes on that backend. Ordering:
//  - a copy reads a tensor another backend produced, so that backend is
//    synchronized first;
//  - the copy's pipeline slot may still be read by the previous run: with
//    events the split's backend waits for the slot's event (recorded after
//    the backend's last split of that run), else it is synchronized;
//  - leafs (user data) are copied synchronously, so the caller may rewrite
//    them as soon as the call returns;
//  - a copy queued on backend B that reads memory of allocator A makes
//    anything that writes into A's memory later synchronize B first.
// With an eval callback the split runs in pieces: up to and including each
// node the callback asked for, then synchronize and hand it the node.
#include "core/errors.hpp"
#include "core/handles.hpp"
#include "core/sched/sched.hpp"
#include "core/trace/span.hpp"

namespace bp::core {
namespace {

bp_event *slot_event(bp_sched *s, int backend) {
  auto &row = s->events[(size_t)backend];
  return row.empty() ? nullptr : row[(size_t)s->cur_slot];
}

// Waits for queued transfers that still read memory of |backend|'s allocator.
bp_status flush_readers(bp_sched *s, int backend) {
  auto &readers = s->readers_of[(size_t)s->galloc_of[(size_t)backend]];
  for (int r : readers) {
    bp_status st = bp_backend_synchronize(s->backends[(size_t)r]);
    if (st != BP_OK) return st;
  }
  readers.clear();
  return BP_OK;
}

bp_status copy_input(bp_sched *s, const sched_copy &c) {
  bp_backend *dst_be = s->backends[(size_t)c.backend];
  bp_tensor *dst = c.versions[s->cur_slot];
  // Waits included: what the copy costs the split is its waits too.
  trace::span span(dst_be->ref.ctx, "copy", "copy");
  if (span.active()) {
    span.args() = "\"kind\":\"" + std::string(c.user_data ? "input" : "intermediate") +
                  "\",\"bytes\":" + std::to_string(bp_tensor_nbytes(c.src)) + ",\"from\":\"" +
                  (c.src_backend >= 0 ? s->backends[(size_t)c.src_backend]->name : std::string("user")) + "\"";
  }
  bp_event *ev = slot_event(s, c.backend);
  bp_status st;
  if (c.user_data) {
    st = ev ? bp_event_synchronize(ev) : bp_backend_synchronize(dst_be);
    return st != BP_OK ? st : bp_tensor_copy(c.src, dst);
  }
  st = ev ? bp_backend_wait_event(dst_be, ev) : bp_backend_synchronize(dst_be);
  if (st != BP_OK) return st;
  if (c.src_backend >= 0) {
    st = bp_backend_synchronize(s->backends[(size_t)c.src_backend]);
    if (st != BP_OK) return st;
  }
  const bp_tensor *root = alloc_root(c.src);
  bool async = root->buffer && bp_buffer_is_host(root->buffer) && dst_be->device &&
               (dst_be->device->caps & BP_DEVICE_CAP_ASYNC) && c.src_backend >= 0;
  if (async) {
    st = bp_backend_tensor_set_async(dst_be, dst, c.src->data, 0, bp_tensor_nbytes(c.src));
    if (st == BP_OK) {
      s->readers_of[(size_t)s->galloc_of[(size_t)c.src_backend]].push_back(c.backend);
      return BP_OK;
    }
    if (st != BP_ERR_UNIMPLEMENTED) return st;
  }
  if (ev) {
    st = bp_event_synchronize(ev);
    if (st != BP_OK) return st;
  }
  return bp_tensor_copy(c.src, dst);
}

bp_status compute_range(bp_backend *be, const bp_graph &exec, size_t from, size_t to) {
  if (from >= to) return BP_OK;
  bp_graph part;
  part.nodes.assign(exec.nodes.begin() + (ptrdiff_t)from, exec.nodes.begin() + (ptrdiff_t)to);
  part.max_nodes = part.nodes.size();
  // |part| dies here: the backend must be done with it.
  bp_status st = bp_backend_graph_compute_async(be, &part);
  return st != BP_OK ? st : bp_backend_synchronize(be);
}

// Runs the current slot of |sp| through the backend's graph plan when it has
// plans: made at the first run, replayed after (the allocation, and so every
// address the plan recorded, stays until the splits are rebuilt).
bp_status run_planned(bp_sched *s, sched_split &sp, bp_backend *be) {
  const bp_graph &exec = sp.exec[(size_t)s->cur_slot];
  if (!s->use_plans || sp.plans_unsupported) return bp_backend_graph_compute_async(be, &exec);
  if (sp.plans.size() < sp.exec.size()) sp.plans.resize(sp.exec.size());
  graph_plan_ptr &plan = sp.plans[(size_t)s->cur_slot];
  if (!plan) {
    bp_graph_plan *made = nullptr;
    bp_status st = bp_graph_plan_new(be, &exec, &made);
    if (st == BP_ERR_UNIMPLEMENTED) {
      sp.plans_unsupported = true;
      bp_clear_error();
      return bp_backend_graph_compute_async(be, &exec);
    }
    if (st != BP_OK) return st;
    plan.reset(made);
  }
  return bp_graph_plan_compute_async(plan.get());
}

// Runs |sp| with the eval callback; sets *stop when the callback says so.
bp_status run_observed(bp_sched *s, const sched_split &sp, bool *stop) {
  bp_backend *be = s->backends[(size_t)sp.backend];
  const bp_graph &exec = sp.exec[(size_t)s->cur_slot];
  size_t done = 0;
  for (int i = sp.first; i < sp.end; ++i) {
    bp_tensor *t = s->graph_nodes[(size_t)i];
    if (!s->callback(t, true, s->callback_data)) continue;
    size_t upto = done;
    while (upto < sp.exec_pos.size() && sp.exec_pos[upto] <= i) ++upto;
    bp_status st = compute_range(be, exec, done, upto);
    if (st != BP_OK) return st;
    done = upto;
    st = bp_backend_synchronize(be);
    if (st != BP_OK) return st;
    if (!s->callback(t, false, s->callback_data)) {
      *stop = true;
      return BP_OK;
    }
  }
  return compute_range(be, exec, done, exec.nodes.size());
}

}  // namespace

bp_status sched_synchronize_all(bp_sched *s) {
  bp_status first = BP_OK;
  for (bp_backend *be : s->backends) {
    bp_status st = bp_backend_synchronize(be);
    if (st != BP_OK && first == BP_OK) first = st;
  }
  for (auto &r : s->readers_of) r.clear();
  return first;
}

bp_status sched_compute_splits(bp_sched *s) {
  bool stop = false;
  for (sched_split &sp : s->splits) {
    bp_backend *be = s->backends[(size_t)sp.backend];
    trace::span span(be->ref.ctx, "sched", "split");
    if (span.active()) {
      span.name() = "split " + std::to_string(&sp - s->splits.data());
      span.args() = "\"nodes\":" + std::to_string(sp.end - sp.first) +
                    ",\"inputs\":" + std::to_string(sp.inputs.size()) + ",\"bytes_copied\":" + std::to_string(sp.bytes);
    }
    bp_status st = flush_readers(s, sp.backend);
    if (st != BP_OK) return st;
    for (int ci : sp.inputs) {
      st = copy_input(s, s->copies[(size_t)ci]);
      if (st != BP_OK) return st;
    }
    if (s->callback) {
      st = run_observed(s, sp, &stop);
    } else if (!sp.exec[(size_t)s->cur_slot].nodes.empty()) {
      st = run_planned(s, sp, be);
    }
    if (st != BP_OK) return st;
    // Recorded after every split, not only after those that copied: a later
    // split on the same backend may read a copy an earlier one made in this
    // slot, and the next use of the slot must wait for that reader too.
    if (bp_event *ev = slot_event(s, sp.backend)) {
      st = bp_event_record(ev, be);
      if (st != BP_OK) return st;
    }
    if (stop) break;
  }
  s->cur_slot = (s->cur_slot + 1) % s->n_slots;
  return BP_OK;
}

}  // namespace bp::core
