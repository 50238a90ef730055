import { projectionUnitSuite } from '../src/testing.js'
import { countUnit, lastTextUnit } from './units.js'

const script = [
  { type: 'user/message', data: { text: 'plan the release' } },
  { type: 'turn/start', data: { turn: 1 } },
  { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'Sure' } },
  { type: 'assistant/message', data: { turn: 1, text: 'Sure.' } },
  { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
  { type: 'user/message', data: { text: 'go on' } },
]

projectionUnitSuite('lastText', { unit: lastTextUnit, script })
projectionUnitSuite('count', { unit: countUnit, script, ignoresUnknownTypes: false })
