import { DISPATCHES, FALLBACK_ACTIONS, STICKY_FIELDS } from './types.js';

/**
 * The JSON Schema of a rules file: its structure (fields, types, enums). Meaning across rules
 * (duplicate names, shadowing, sticky without sticky_by) is checked in semantics.ts.
 *
 * `x-expect` is an annotation read by the error formatter: the phrase that completes
 * "<field> must be …" for a type or pattern error, so messages name what a field accepts
 * instead of the schema's inner branches. Editors that use the schema ignore it.
 */

export const MAX_TIMEOUT_MS = 3_600_000;
export const RULE_NAME_PATTERN = /^[a-z0-9_.-]+$/;

const STICKY_BY_EXPECT = `one of ${STICKY_FIELDS.join(', ')} or headers.<name>`;
export const STICKY_BY_PATTERN = new RegExp(`^(?:${STICKY_FIELDS.join('|')}|headers\\.[A-Za-z0-9_.-]+)$`);

const nonEmptyString = { type: 'string', minLength: 1 } as const;

/** A plain string (exact), a list of strings (any of), or {exact}, {prefix} or {any_of}. */
const stringMatch = {
  if: { type: 'string' },
  then: nonEmptyString,
  else: {
    if: { type: 'array' },
    then: { type: 'array', items: nonEmptyString, minItems: 1 },
    else: {
      type: 'object',
      'x-expect': 'a string, a list of strings, or {prefix: …}',
      properties: {
        exact: nonEmptyString,
        prefix: nonEmptyString,
        any_of: { type: 'array', items: nonEmptyString, minItems: 1, 'x-expect': 'a list of strings' },
      },
      additionalProperties: false,
      minProperties: 1,
      maxProperties: 1,
    },
  },
} as const;

const tags = {
  if: { type: 'string' },
  then: nonEmptyString,
  else: { type: 'array', items: nonEmptyString, minItems: 1, 'x-expect': 'a tag or a list of tags' },
} as const;

const rule = {
  type: 'object',
  'x-expect': 'a mapping with name, when, action and optionally fallback',
  required: ['name', 'when', 'action'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', pattern: RULE_NAME_PATTERN.source, 'x-expect': 'made of a-z, 0-9, "_", "." and "-"' },
    when: {
      type: 'object',
      'x-expect': 'a mapping of conditions (`when: {}` matches every message)',
      additionalProperties: false,
      properties: { message_type: stringMatch, target_role: stringMatch, source_role: stringMatch, custom_tags: tags },
    },
    action: {
      type: 'object',
      'x-expect': 'a mapping with dispatch and optionally sticky_by, priority, timeout_ms',
      required: ['dispatch'],
      additionalProperties: false,
      properties: {
        dispatch: { enum: DISPATCHES },
        sticky_by: { type: 'string', pattern: STICKY_BY_PATTERN.source, 'x-expect': STICKY_BY_EXPECT },
        // Case-insensitive: the design notes write `priority: high`, envelopes say HIGH.
        priority: {
          type: 'string',
          pattern: '^(?:[Hh][Ii][Gg][Hh]|[Nn][Oo][Rr][Mm][Aa][Ll]|[Ll][Oo][Ww])$',
          'x-expect': 'one of high, normal, low',
        },
        timeout_ms: { type: 'integer', minimum: 1, maximum: MAX_TIMEOUT_MS, 'x-expect': `an integer from 1 to ${MAX_TIMEOUT_MS}` },
      },
    },
    fallback: {
      type: 'object',
      'x-expect': 'a mapping {if_no_available_agent: …}',
      required: ['if_no_available_agent'],
      additionalProperties: false,
      properties: { if_no_available_agent: { enum: FALLBACK_ACTIONS } },
    },
  },
} as const;

export const RULES_JSON_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Agent-Reach ReachRule file',
  type: 'object',
  'x-expect': 'a mapping with a `rules:` list',
  required: ['rules'],
  additionalProperties: false,
  properties: {
    version: { const: 1 },
    rules: { type: 'array', items: rule, 'x-expect': 'a list of rules' },
  },
} as const;
