export { vitestGlobalSetup as default } from '../src/testing/index.js'
