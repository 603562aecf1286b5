/** The sign-in form: the e-mail step, then the code step for that address. */
export const SignInForm = (props: { csrf: string; email?: string; step: "email" | "code" }) =>
  props.step === "email" ? (
    <form method="post" action="/console/sign-in" class="card">
      <input type="hidden" name="_csrf" value={props.csrf} />
      <label for="email">E-mail</label>
      <input id="email" name="email" type="email" required autocomplete="email" />
      <button type="submit">Send me a code</button>
    </form>
  ) : (
    <form method="post" action="/console/sign-in/verify" class="card">
      <input type="hidden" name="_csrf" value={props.csrf} />
      <input type="hidden" name="email" value={props.email ?? ""} />
      <p>If {props.email} may use the console, a 6-digit code is on its way. It is valid for 10 minutes.</p>
      <label for="code">Code</label>
      <input
        id="code"
        name="code"
        inputmode="numeric"
        pattern="\d{6}"
        maxlength={6}
        required
        autocomplete="one-time-code"
      />
      <button type="submit">Sign in</button>
      <p class="muted">
        <a href="/console/sign-in">Use another address, or ask for a new code</a>
      </p>
    </form>
  );
