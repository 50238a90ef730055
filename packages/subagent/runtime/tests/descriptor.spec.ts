import { describe, expect, it } from 'vitest'
import { isSubagentDescriptor, isSubagentOptions } from '../src/descriptor-checks.js'
import { subagentDescriptorSchema, subagentOptionsSchema } from '../src/schemas.js'

describe('subagent/descriptor v2: exactly the keys and types the harness accepts', () => {
  it('accepts a one-shot with or without a label (any string, the empty one too), and nothing else on it', () => {
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: 'p' })).toEqual({
      version: 2,
      mode: 'one-shot',
      provider: 'p',
    })
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: 'p', label: 'scan' }).label).toBe('scan')
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: 'p', label: '' }).label).toBe('')
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: '' }).provider).toBe('')
  })

  it('accepts a continuable with its composition (agentProvider, agentModel, persona, toolFilter), any string as label', () => {
    const continuable = {
      version: 2,
      mode: 'continuable',
      provider: 'inprocess',
      label: 'reviewer',
      agentProvider: 'deepseek',
      agentModel: 'deepseek-chat',
      persona: 'You review diffs for correctness.',
      toolFilter: { allow: ['read_file', 'grep'], deny: ['bash'] },
    }
    expect(subagentDescriptorSchema.parse(continuable)).toEqual(continuable)
    expect(subagentDescriptorSchema.parse({ ...continuable, toolFilter: { deny: ['bash'] } })).toMatchObject({
      toolFilter: { deny: ['bash'] },
    })
    expect(subagentDescriptorSchema.parse({ ...continuable, label: '', agentProvider: '', toolFilter: { allow: [] } })).toMatchObject({
      label: '',
      agentProvider: '',
    })
  })

  it.each([
    ['a continuable without a label', { version: 2, mode: 'continuable', provider: 'p' }],
    ['an unknown version', { version: 3, mode: 'one-shot', provider: 'p' }],
    ['version 1', { version: 1, mode: 'one-shot', provider: 'p' }],
    ['a string version', { version: '2', mode: 'one-shot', provider: 'p' }],
    ['an unknown mode', { version: 2, mode: 'forever', provider: 'p', label: 'x' }],
    ['a missing provider', { version: 2, mode: 'one-shot' }],
    ['an extra key on a one-shot', { version: 2, mode: 'one-shot', provider: 'p', extra: 1 }],
    ['a persona on a one-shot', { version: 2, mode: 'one-shot', provider: 'p', persona: 'terse' }],
    ['a toolFilter on a one-shot', { version: 2, mode: 'one-shot', provider: 'p', toolFilter: { allow: ['read'] } }],
    ['an outputSchema', { version: 2, mode: 'one-shot', provider: 'p', outputSchema: { type: 'object' } }],
    ['a model on a continuable', { version: 2, mode: 'continuable', provider: 'p', label: 'x', model: 'm' }],
    ['instructions on a continuable', { version: 2, mode: 'continuable', provider: 'p', label: 'x', instructions: 'be brief' }],
    ['maxTurns on a continuable', { version: 2, mode: 'continuable', provider: 'p', label: 'x', maxTurns: 3 }],
    ['an empty tool filter', { version: 2, mode: 'continuable', provider: 'p', label: 'x', toolFilter: {} }],
    ['a tool filter with a non-array allow', { version: 2, mode: 'continuable', provider: 'p', label: 'x', toolFilter: { allow: 'read' } }],
    ['a tool filter with a non-string entry', { version: 2, mode: 'continuable', provider: 'p', label: 'x', toolFilter: { deny: [1] } }],
    [
      'a tool filter with an unknown key',
      { version: 2, mode: 'continuable', provider: 'p', label: 'x', toolFilter: { allow: [], only: [] } },
    ],
    ['a numeric agentModel', { version: 2, mode: 'continuable', provider: 'p', label: 'x', agentModel: 4 }],
    ['an extra key on a continuable', { version: 2, mode: 'continuable', provider: 'p', label: 'x', colour: 'red' }],
    ['a wrong label type', { version: 2, mode: 'continuable', provider: 'p', label: 7 }],
    ['a numeric one-shot label', { version: 2, mode: 'one-shot', provider: 'p', label: 7 }],
    ['an explicit undefined label', { version: 2, mode: 'one-shot', provider: 'p', label: undefined }],
    ['a non-object', 'one-shot'],
    ['an array', [2, 'one-shot']],
    ['null', null],
  ])('rejects %s', (_name, payload) => {
    expect(subagentDescriptorSchema.safeParse(payload).success).toBe(false)
    expect(isSubagentDescriptor(payload)).toBe(false)
  })
})

describe('subagent/options v1', () => {
  it('carries every setting the descriptor has no room for', () => {
    const options = {
      version: 1,
      model: 'm',
      instructions: 'be brief',
      maxTurns: 3,
      outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
      agentProvider: 'deepseek',
      agentModel: 'deepseek-chat',
      persona: 'terse',
      toolFilter: { allow: ['read'] },
    }
    expect(subagentOptionsSchema.parse(options)).toEqual(options)
    expect(isSubagentOptions(options)).toBe(true)
  })

  it.each([
    ['no version', { model: 'm' }],
    ['another version', { version: 2, model: 'm' }],
    ['an unknown key', { version: 1, colour: 'red' }],
    ['a zero maxTurns', { version: 1, maxTurns: 0 }],
    ['a non-object outputSchema', { version: 1, outputSchema: 'object' }],
    ['an empty model', { version: 1, model: '' }],
    ['an empty tool filter', { version: 1, toolFilter: {} }],
  ])('rejects %s', (_name, payload) => {
    expect(subagentOptionsSchema.safeParse(payload).success).toBe(false)
    expect(isSubagentOptions(payload)).toBe(false)
  })
})
