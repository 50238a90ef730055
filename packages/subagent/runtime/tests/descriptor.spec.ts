import { describe, expect, it } from 'vitest'
import { subagentDescriptorSchema } from '../src/index.js'

describe('subagent/descriptor v2', () => {
  it('accepts a one-shot with or without a label, and a continuable with a label and settings', () => {
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: 'p' })).toEqual({
      version: 2,
      mode: 'one-shot',
      provider: 'p',
    })
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: 'p', label: 'scan' }).label).toBe('scan')
    const continuable = {
      version: 2,
      mode: 'continuable',
      provider: 'p',
      label: 'helper',
      model: 'm',
      instructions: 'be brief',
      maxTurns: 3,
    }
    expect(subagentDescriptorSchema.parse(continuable)).toEqual(continuable)
  })

  it("accepts the harness's continuable fields (agentProvider, agentModel, persona, toolFilter) and outputSchema, on either mode", () => {
    // Written from the harness's documented ContinuableSubagentDescriptorData fields.
    const harness = {
      version: 2,
      mode: 'continuable',
      provider: 'inprocess',
      label: 'reviewer',
      agentProvider: 'deepseek',
      agentModel: 'deepseek-chat',
      persona: 'You review diffs for correctness.',
      toolFilter: { allow: ['read_file', 'grep'], deny: ['bash'] },
    }
    expect(subagentDescriptorSchema.parse(harness)).toEqual(harness)
    expect(subagentDescriptorSchema.parse({ ...harness, toolFilter: { deny: ['bash'] } }).toolFilter).toEqual({ deny: ['bash'] })
    const withSchema = {
      version: 2,
      mode: 'one-shot',
      provider: 'p',
      outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
    }
    expect(subagentDescriptorSchema.parse(withSchema)).toEqual(withSchema)
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: 'p', persona: 'terse', maxTurns: 2 })).toMatchObject({
      persona: 'terse',
      maxTurns: 2,
    })
  })

  it.each([
    ['a continuable without a label', { version: 2, mode: 'continuable', provider: 'p' }],
    ['an empty label', { version: 2, mode: 'one-shot', provider: 'p', label: '' }],
    ['an unknown version', { version: 3, mode: 'one-shot', provider: 'p' }],
    ['version 1', { version: 1, mode: 'one-shot', provider: 'p' }],
    ['an unknown mode', { version: 2, mode: 'forever', provider: 'p', label: 'x' }],
    ['a missing provider', { version: 2, mode: 'one-shot' }],
    ['an extra key on a one-shot', { version: 2, mode: 'one-shot', provider: 'p', extra: 1 }],
    ['a zero maxTurns', { version: 2, mode: 'one-shot', provider: 'p', maxTurns: 0 }],
    ['an empty tool filter', { version: 2, mode: 'continuable', provider: 'p', label: 'x', toolFilter: {} }],
    ['a tool filter with a non-array allow', { version: 2, mode: 'continuable', provider: 'p', label: 'x', toolFilter: { allow: 'read' } }],
    [
      'a tool filter with an unknown key',
      { version: 2, mode: 'continuable', provider: 'p', label: 'x', toolFilter: { allow: [], only: [] } },
    ],
    ['a numeric agentModel', { version: 2, mode: 'continuable', provider: 'p', label: 'x', agentModel: 4 }],
    ['an empty agentProvider', { version: 2, mode: 'continuable', provider: 'p', label: 'x', agentProvider: '' }],
    ['a non-object outputSchema', { version: 2, mode: 'one-shot', provider: 'p', outputSchema: 'object' }],
    ['a harness continuable with an empty label', { version: 2, mode: 'continuable', provider: 'p', label: '', persona: 'x' }],
    ['an extra key on a continuable', { version: 2, mode: 'continuable', provider: 'p', label: 'x', colour: 'red' }],
    ['a wrong label type', { version: 2, mode: 'continuable', provider: 'p', label: 7 }],
    ['an explicit undefined label', { version: 2, mode: 'one-shot', provider: 'p', label: undefined }],
    ['a non-object', 'one-shot'],
    ['null', null],
  ])('rejects %s', (_name, payload) => {
    expect(subagentDescriptorSchema.safeParse(payload).success).toBe(false)
  })
})
