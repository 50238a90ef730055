import { describe, expect, it } from 'vitest'
import { subagentDescriptorSchema } from '../src/index.js'

describe('subagent/descriptor v2', () => {
  it('accepts a one-shot with or without a label, and a continuable with a label and settings', () => {
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: 'p' })).toEqual({ version: 2, mode: 'one-shot', provider: 'p' })
    expect(subagentDescriptorSchema.parse({ version: 2, mode: 'one-shot', provider: 'p', label: 'scan' }).label).toBe('scan')
    const continuable = { version: 2, mode: 'continuable', provider: 'p', label: 'helper', model: 'm', instructions: 'be brief', maxTurns: 3 }
    expect(subagentDescriptorSchema.parse(continuable)).toEqual(continuable)
  })

  it.each([
    ['a continuable without a label', { version: 2, mode: 'continuable', provider: 'p' }],
    ['an empty label', { version: 2, mode: 'one-shot', provider: 'p', label: '' }],
    ['an unknown version', { version: 3, mode: 'one-shot', provider: 'p' }],
    ['version 1', { version: 1, mode: 'one-shot', provider: 'p' }],
    ['an unknown mode', { version: 2, mode: 'forever', provider: 'p', label: 'x' }],
    ['a missing provider', { version: 2, mode: 'one-shot' }],
    ['an extra key on a one-shot', { version: 2, mode: 'one-shot', provider: 'p', extra: 1 }],
    ['a continuable setting on a one-shot', { version: 2, mode: 'one-shot', provider: 'p', maxTurns: 2 }],
    ['an extra key on a continuable', { version: 2, mode: 'continuable', provider: 'p', label: 'x', colour: 'red' }],
    ['a wrong label type', { version: 2, mode: 'continuable', provider: 'p', label: 7 }],
    ['an explicit undefined label', { version: 2, mode: 'one-shot', provider: 'p', label: undefined }],
    ['a non-object', 'one-shot'],
    ['null', null],
  ])('rejects %s', (_name, payload) => {
    expect(subagentDescriptorSchema.safeParse(payload).success).toBe(false)
  })
})
