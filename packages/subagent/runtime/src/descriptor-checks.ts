import type { SubagentDescriptor, SubagentToolFilter } from './descriptor.js'
import { SUBAGENT_DESCRIPTOR_VERSION, SUBAGENT_OPTIONS_VERSION } from './event-names.js'
import type { SubagentOptions } from './options.js'
import { isPlain, isSeq, onlyKeys, type Plain } from './state-checks.js'

/**
 * Plain checks of logged descriptors and options records: the rules of the
 * zod/mini schemas in `schemas.ts`, for the values an event or a checkpoint
 * row holds (lossless JSON: plain objects with own keys, finite numbers, no
 * `undefined`). On those values a check accepts exactly what its schema
 * accepts (the tests hold them to the schemas), so the projection units fold
 * and check rows without loading zod.
 */

const ONE_SHOT_KEYS = ['version', 'mode', 'provider', 'label']
const CONTINUABLE_KEYS = [...ONE_SHOT_KEYS, 'agentProvider', 'agentModel', 'persona', 'toolFilter']
const FILTER_KEYS = ['allow', 'deny']
const SETTINGS_KEYS = [
  'agentProvider',
  'agentModel',
  'persona',
  'toolFilter',
  'outputSchema',
  'model',
  'instructions',
  'maxTokens',
  'maxCostUsd',
  'maxWallMs',
  'maxTurns',
]
const OPTIONS_KEYS = ['version', ...SETTINGS_KEYS]

/** Absent, or a value `check` accepts (an exact optional: a present `undefined` is refused). */
function optional(value: Plain, key: string, check: (field: unknown) => boolean): boolean {
  return !Object.hasOwn(value, key) || check(value[key])
}

const isString = (value: unknown): boolean => typeof value === 'string'
const isNonEmpty = (value: unknown): boolean => typeof value === 'string' && value.length > 0
const isStrings = (value: unknown): boolean => Array.isArray(value) && value.every(isString)
const isPositiveInt = (value: unknown): boolean => typeof value === 'number' && Number.isSafeInteger(value) && value > 0
const isPositiveUsd = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value) && value > 0

/** A JSON value: strings, booleans, null, finite numbers, arrays and plain objects of them. */
function isJson(value: unknown): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true
    case 'number':
      return Number.isFinite(value)
    case 'object':
      if (value === null) return true
      if (Array.isArray(value)) return value.every(isJson)
      return isJsonObject(value)
    default:
      return false
  }
}

function isJsonObject(value: unknown): boolean {
  if (!isPlain(value)) return false
  for (const key in value) if (!Object.hasOwn(value, key) || !isJson(value[key])) return false
  return true
}

/** `{ allow?, deny? }`, lists of tool names, at least one of the two. */
export function isToolFilter(input: unknown): input is SubagentToolFilter {
  if (!isPlain(input) || !onlyKeys(input, FILTER_KEYS)) return false
  if (!Object.hasOwn(input, 'allow') && !Object.hasOwn(input, 'deny')) return false
  return optional(input, 'allow', isStrings) && optional(input, 'deny', isStrings)
}

/** A v2 descriptor: a one-shot `{ version, mode, provider, label? }` or a continuable with a label and its composition. */
export function isSubagentDescriptor(input: unknown): input is SubagentDescriptor {
  if (!isPlain(input) || input.version !== SUBAGENT_DESCRIPTOR_VERSION || typeof input.provider !== 'string') return false
  if (input.mode === 'one-shot') return onlyKeys(input, ONE_SHOT_KEYS) && optional(input, 'label', isString)
  if (input.mode !== 'continuable' || !onlyKeys(input, CONTINUABLE_KEYS) || typeof input.label !== 'string') return false
  return (
    optional(input, 'agentProvider', isString) &&
    optional(input, 'agentModel', isString) &&
    optional(input, 'persona', isString) &&
    optional(input, 'toolFilter', isToolFilter)
  )
}

/** A v1 options record: `{ version: 1, ...settings }`, every setting of its type. */
export function isSubagentOptions(input: unknown): input is SubagentOptions {
  if (!isPlain(input) || input.version !== SUBAGENT_OPTIONS_VERSION || !onlyKeys(input, OPTIONS_KEYS)) return false
  return (
    optional(input, 'agentProvider', isNonEmpty) &&
    optional(input, 'agentModel', isNonEmpty) &&
    optional(input, 'persona', isString) &&
    optional(input, 'toolFilter', isToolFilter) &&
    optional(input, 'outputSchema', isJsonObject) &&
    optional(input, 'model', isNonEmpty) &&
    optional(input, 'instructions', isString) &&
    optional(input, 'maxTokens', isPositiveInt) &&
    optional(input, 'maxCostUsd', isPositiveUsd) &&
    optional(input, 'maxWallMs', isPositiveInt) &&
    optional(input, 'maxTurns', isPositiveInt)
  )
}

const PROFILE_KEYS = ['profile', 'options']
const PROFILE_FIELDS = ['seq', 'descriptor']
const RECORD_FIELDS = ['seq', 'options']

/** The `subagentProfile` state: `{ profile?: { seq, descriptor }, options?: { seq, options } }`. */
export function isProfileState(input: unknown): boolean {
  if (!isPlain(input) || !onlyKeys(input, PROFILE_KEYS)) return false
  return (
    optional(
      input,
      'profile',
      (profile) => isPlain(profile) && onlyKeys(profile, PROFILE_FIELDS) && isSeq(profile.seq) && isSubagentDescriptor(profile.descriptor),
    ) &&
    optional(
      input,
      'options',
      (record) => isPlain(record) && onlyKeys(record, RECORD_FIELDS) && isSeq(record.seq) && isSubagentOptions(record.options),
    )
  )
}
