import { projectionUnitSuite } from '@dsh/session-projection/testing'
import { sessionContextUnit } from '../src/index.js'
import { BLOCK_TURN, FULL_SCRIPT, OLD_TURN } from './scripts.js'

// The registry's contract suite: the cut reaches init for sessions, forks cut at
// every position and folds; live = fold = revived checkpoint; JSON states that
// pass the schema; no mutation; unknown types keep the state; copies that throw
// in init/apply/view are isolated; and no garbage field or time makes it throw.
projectionUnitSuite('sessionContext', { unit: sessionContextUnit, script: FULL_SCRIPT, neverThrows: true })
projectionUnitSuite('sessionContext over the older events', { unit: sessionContextUnit, script: OLD_TURN, neverThrows: true })
projectionUnitSuite('sessionContext over block events', { unit: sessionContextUnit, script: BLOCK_TURN, neverThrows: true })
