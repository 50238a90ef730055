import { expect, it } from 'vitest'
import * as entry from '../src/index.js'
import * as turn from '../src/turn-loop.js'

it('the main entry holds what an application uses, the provider-neutral pieces other drivers share, and no internals', () => {
  expect(Object.keys(entry).sort()).toEqual([
    'API_KEY_ENV',
    'ASSISTANT_ERROR_EVENT',
    'ASSISTANT_REASONING_EVENT',
    'BASE_URL_ENV',
    'DEFAULT_BASE_URL',
    'DEFAULT_MODEL',
    'DEFAULT_NOTICES',
    'DriverOpenAIError',
    'ERROR_TEXT_MAX_CHARS',
    'MODEL_APIS',
    'MODEL_ENV',
    'REPLY_HEAD_BYTES',
    'REPLY_HEAD_CHARS',
    'STEP_MAX_CHARS',
    'STEP_MAX_PARTS',
    'StepBound',
    'TOOL_RESULT_MAX_BYTES',
    'boundedText',
    'brokenAfterOutput',
    'budgetCompaction',
    'createModelClient',
    'createOpenAIDriver',
    'createOpenAISummarizer',
    'defaultBackoff',
    'fetchWithBoundedErrors',
    'isRetryableStatus',
    'loggedArguments',
    'notAnEventStream',
    'phraseNotices',
    'redactor',
    'requestDeadline',
    'retryAfterMs',
    'runAgent',
    'runTool',
    'sentence',
    'toJson',
  ])
})

it('the turn subpath holds the turn loop other drivers run on, and nothing else', () => {
  expect(Object.keys(turn).sort()).toEqual(['promptTurn', 'runTurnLoop', 'subagentTurn', 'systemPrompt', 'turnFrame'])
})
