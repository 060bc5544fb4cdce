import type { DeliverFrame } from './frames.js';
import type { AgentApi, RequestOptions, SendOptions } from './node-types.js';
import type { SendFields } from './types.js';

/**
 * What a handler sends continues its delivery's trace (R-F1): the delivery's traceparent
 * when the dispatcher sent one, else at least its trace_id. A caller's own traceparent or trace
 * id always wins.
 */
export function continuingApi(api: AgentApi, d: DeliverFrame): AgentApi {
  const traceparent = d.traceparent;
  const traceId = d.message.trace_id || undefined;
  if (!traceparent && !traceId) return api;
  const fields = (f: SendFields): SendFields => (f.traceparent || f.trace_id ? f : traceparent ? { ...f, traceparent } : { ...f, trace_id: traceId });
  const options = <O extends SendOptions>(o: O): O => (o.traceparent || o.traceId ? o : traceparent ? { ...o, traceparent } : { ...o, traceId });
  return {
    get agentId() {
      return api.agentId;
    },
    send: (f, o) => api.send(fields(f), o),
    publish: (topic, payload, o: SendOptions = {}) => api.publish(topic, payload, options(o)),
    request: (capability, payload, o: RequestOptions = {}) => api.request(capability, payload, options(o)),
    requestReply: (capability, payload, o: RequestOptions = {}) => api.requestReply(capability, payload, options(o)),
  };
}
