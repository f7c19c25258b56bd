/** init.js, imported as text: it is served to the browser, never run on the server. */
declare const text: string;
export default text;
