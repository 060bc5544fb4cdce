import { describe, expect, it } from 'vitest';
import { acceptedFrame, CLOSE, errorFrame, parseAgentFrame, pingFrame, welcomeFrame } from '../../../services/dispatcher/dist/protocol.js';

// The frames of docs/design.md §4 as the dispatcher reads and writes them.
describe('dispatcher protocol: agent frames', () => {
  it('reads hello with and without token and last_seq', () => {
    expect(parseAgentFrame('{"type":"hello","agent_id":"a.b","token":"t","last_seq":7}')).toEqual({ type: 'hello', agent_id: 'a.b', token: 't', last_seq: 7 });
    expect(parseAgentFrame('{"type":"hello","agent_id":"a.b"}')).toEqual({ type: 'hello', agent_id: 'a.b', token: undefined, last_seq: undefined });
  });

  it('refuses a negative or fractional last_seq', () => {
    expect(parseAgentFrame('{"type":"hello","last_seq":-1}')).toMatchObject({ type: 'invalid', message: expect.stringMatching(/last_seq/) });
    expect(parseAgentFrame('{"type":"hello","last_seq":1.5}')).toMatchObject({ type: 'invalid' });
  });

  it('reads ack and reject, which need seq and message_id', () => {
    expect(parseAgentFrame('{"type":"ack","seq":3,"message_id":"msg_1"}')).toEqual({ type: 'ack', seq: 3, message_id: 'msg_1' });
    expect(parseAgentFrame('{"type":"ack","message_id":"msg_1"}')).toMatchObject({ type: 'invalid', message: 'ack: seq is required' });
    expect(parseAgentFrame('{"type":"reject","seq":3,"message_id":"m","code":"BUSY","reason":"full","retryable":false}')).toEqual({
      type: 'reject',
      seq: 3,
      message_id: 'm',
      code: 'BUSY',
      reason: 'full',
      retryable: false,
    });
    expect(parseAgentFrame('{"type":"reject","seq":3,"message_id":"m","retryable":"yes"}')).toMatchObject({ type: 'invalid' });
  });

  it('reads progress, which needs seq and message_id', () => {
    expect(parseAgentFrame('{"type":"progress","seq":4,"message_id":"msg_1"}')).toEqual({ type: 'progress', seq: 4, message_id: 'msg_1' });
    expect(parseAgentFrame('{"type":"progress","message_id":"msg_1"}')).toMatchObject({ type: 'invalid', message: 'progress: seq is required' });
    expect(parseAgentFrame('{"type":"progress","seq":4}')).toMatchObject({ type: 'invalid' });
  });

  it('reads result with a JSON payload or payload_b64; status defaults to ok', () => {
    expect(parseAgentFrame('{"type":"result","message_id":"m","payload":{"a":1}}')).toMatchObject({ type: 'result', status: 'ok', payload: { a: 1 } });
    expect(parseAgentFrame('{"type":"result","message_id":"m","status":"error","payload_b64":"AAE="}')).toMatchObject({ status: 'error', payload_b64: 'AAE=' });
    expect(parseAgentFrame('{"type":"result","message_id":"m","status":"maybe"}')).toMatchObject({ type: 'invalid' });
  });

  it('reads send as envelope fields plus client_ref', () => {
    expect(parseAgentFrame('{"type":"send","client_ref":"r1","capability":"x","payload":{}}')).toEqual({
      type: 'send',
      client_ref: 'r1',
      envelope: { capability: 'x', payload: {} },
    });
  });

  it('keeps client_ref on an invalid frame so the error can name it', () => {
    expect(parseAgentFrame('{"type":"nope","client_ref":"r9"}')).toEqual({ type: 'invalid', message: 'unknown frame type "nope"', client_ref: 'r9' });
  });

  it('refuses non-JSON and non-object frames', () => {
    expect(parseAgentFrame('hello')).toMatchObject({ type: 'invalid', message: 'frame is not valid JSON' });
    expect(parseAgentFrame('[1]')).toMatchObject({ type: 'invalid', message: 'frame must be a JSON object' });
  });

  it('reads ping and pong, ts optional', () => {
    expect(parseAgentFrame('{"type":"ping","ts":5}')).toEqual({ type: 'ping', ts: 5 });
    expect(parseAgentFrame('{"type":"pong"}')).toEqual({ type: 'pong', ts: undefined });
  });
});

describe('dispatcher protocol: server frames', () => {
  it('writes welcome, error, accepted and ping', () => {
    expect(JSON.parse(welcomeFrame('conn_1', 15000, 4))).toEqual({ type: 'welcome', connection_id: 'conn_1', heartbeat_ms: 15000, resume_from: 4 });
    expect(JSON.parse(errorFrame('AUTH_FAILED', 'bad', 'r'))).toEqual({ type: 'error', code: 1003, name: 'AUTH_FAILED', message: 'bad', client_ref: 'r' });
    expect(JSON.parse(errorFrame('INVALID_ENVELOPE', 'x'))).toEqual({ type: 'error', code: 4101, name: 'INVALID_ENVELOPE', message: 'x' });
    expect(JSON.parse(acceptedFrame('r', 'msg_1'))).toEqual({ type: 'accepted', client_ref: 'r', message_id: 'msg_1' });
    expect(JSON.parse(pingFrame(9))).toEqual({ type: 'ping', ts: 9 });
  });

  it('uses the close codes of docs/design.md §4', () => {
    expect(CLOSE).toMatchObject({ DUPLICATE: 4001, AUTH_FAILED: 4003, HEARTBEAT_TIMEOUT: 4008, FRAME_TOO_LARGE: 4013 });
  });
});
