import { expect, it } from 'vitest'
import * as entry from '../src/index.js'

it('the main entry holds what an application uses, and no internals', () => {
  expect(Object.keys(entry).sort()).toEqual([
    'ANTHROPIC_API_KEY_ENV',
    'ANTHROPIC_BASE_URL_ENV',
    'ANTHROPIC_DEFAULT_BASE_URL',
    'ANTHROPIC_DEFAULT_MAX_TOKENS',
    'ANTHROPIC_DEFAULT_MODEL',
    'ANTHROPIC_MODEL_ENV',
    'DriverAnthropicError',
    'createAnthropicClient',
    'createAnthropicDriver',
    'createAnthropicSummarizer',
    'runAgent',
  ])
})
