import { describe, expect, it } from 'vitest'
import { z } from 'zod/mini'
import { isProfileState, isSubagentDescriptor, isSubagentOptions, isToolFilter } from '../src/descriptor-checks.js'
import { subagentDescriptorSchema, subagentOptionsSchema, subagentToolFilterSchema } from '../src/schemas.js'

// The plain checks the units fold with are held to the zod/mini schemas spawn writes with:
// over every combination of base records and odd field values, each check accepts exactly what its schema accepts.
const ODD: readonly unknown[] = [
  null,
  -1,
  0,
  1,
  1.5,
  2,
  2 ** 53,
  Number.MAX_SAFE_INTEGER,
  '',
  'x',
  'one-shot',
  'continuable',
  true,
  [],
  ['a'],
  [1],
  {},
  { allow: [] },
  { deny: ['x'] },
  { allow: 'x' },
  { allow: [], only: [] },
  { type: 'object', nested: [1, 'a', null, { deep: true }] },
]

const DESCRIPTORS = [
  { version: 2, mode: 'one-shot', provider: 'p' },
  { version: 2, mode: 'one-shot', provider: 'p', label: 'l' },
  { version: 2, mode: 'continuable', provider: 'p', label: 'l' },
  {
    version: 2,
    mode: 'continuable',
    provider: 'p',
    label: 'l',
    agentProvider: 'a',
    agentModel: 'm',
    persona: '',
    toolFilter: { allow: ['t'] },
  },
]
const DESCRIPTOR_KEYS = ['version', 'mode', 'provider', 'label', 'agentProvider', 'agentModel', 'persona', 'toolFilter', 'model', 'extra']

const OPTIONS = [
  { version: 1 },
  { version: 1, model: 'm', maxTurns: 3, maxCostUsd: 0.5, outputSchema: { type: 'object' }, toolFilter: { deny: ['x'] } },
]
const OPTIONS_KEYS = [
  'version',
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
  'label',
]

/** Each base with each key removed, and set to each odd value: the cases the checks meet. */
function variants(bases: readonly Record<string, unknown>[], keys: readonly string[]): unknown[] {
  const out: unknown[] = [...ODD]
  for (const base of bases) {
    out.push(base)
    for (const key of keys) {
      const { [key]: _, ...without } = base
      out.push(without)
      for (const value of ODD) out.push({ ...base, [key]: value })
    }
  }
  return out
}

describe('the plain checks accept exactly what the zod/mini schemas accept', () => {
  it('descriptors', () => {
    const cases = variants(DESCRIPTORS, DESCRIPTOR_KEYS)
    for (const input of cases)
      expect(isSubagentDescriptor(input), JSON.stringify(input)).toBe(subagentDescriptorSchema.safeParse(input).success)
    expect(cases.filter((input) => isSubagentDescriptor(input)).length).toBeGreaterThan(20)
  })

  it('tool filters', () => {
    for (const input of [...ODD, { allow: ['a'], deny: [] }, { allow: [''], deny: [1] }])
      expect(isToolFilter(input), JSON.stringify(input)).toBe(subagentToolFilterSchema.safeParse(input).success)
  })

  it('options records', () => {
    const cases = variants(OPTIONS, OPTIONS_KEYS)
    for (const input of cases) expect(isSubagentOptions(input), JSON.stringify(input)).toBe(subagentOptionsSchema.safeParse(input).success)
    expect(cases.filter((input) => isSubagentOptions(input)).length).toBeGreaterThan(20)
  })

  it('profile states', () => {
    const seq = z.int().check(z.nonnegative())
    const profileZod = z.strictObject({
      profile: z.exactOptional(z.strictObject({ seq, descriptor: subagentDescriptorSchema })),
      options: z.exactOptional(z.strictObject({ seq, options: subagentOptionsSchema })),
    })
    const profile = { seq: 3, descriptor: DESCRIPTORS[3] }
    const options = { seq: 4, options: OPTIONS[1] }
    const bases = [{}, { profile }, { options }, { profile, options }]
    const cases = [
      ...variants(bases, ['profile', 'options', 'extra']),
      ...variants([profile], ['seq', 'descriptor', 'extra']).map((value) => ({ profile: value })),
      ...variants([options], ['seq', 'options', 'extra']).map((value) => ({ options: value })),
    ]
    for (const input of cases) expect(isProfileState(input), JSON.stringify(input)).toBe(profileZod.safeParse(input).success)
  })
})
