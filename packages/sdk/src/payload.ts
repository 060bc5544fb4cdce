/**
 * Payload encoding for frames and HTTP bodies: any JSON value travels as `payload`; bytes
 * (Buffer / Uint8Array) travel as `payload_b64` with a non-JSON content type, because the
 * envelope's payload is opaque bytes (docs/design.md §2) and JSON cannot carry raw bytes.
 */
export function encodePayload(value: unknown): { payload?: unknown; payload_b64?: string; binary: boolean } {
  if (value instanceof Uint8Array) return { payload_b64: Buffer.from(value).toString('base64'), binary: true };
  return { payload: value === undefined ? null : value, binary: false };
}

/** The payload of a JSON message as bytes, when it came as `payload_b64`. */
export function payloadBytes(msg: { payload_b64?: string }): Buffer | undefined {
  return typeof msg.payload_b64 === 'string' ? Buffer.from(msg.payload_b64, 'base64') : undefined;
}

/** Builds the JSON envelope fields of a send from the caller's fields (payload encoded, binary labelled). */
export function envelopeFields<T extends { payload?: unknown; payload_b64?: string; content_type?: string }>(fields: T): Record<string, unknown> {
  const { payload, ...rest } = fields;
  const out: Record<string, unknown> = { ...rest };
  if (fields.payload_b64 === undefined) {
    const enc = encodePayload(payload);
    if (enc.binary) {
      out.payload_b64 = enc.payload_b64;
      out.content_type = fields.content_type ?? 'application/octet-stream';
    } else out.payload = enc.payload;
  }
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out;
}
