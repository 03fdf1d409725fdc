// The signed-in frame: navigation (real links, keyboard reachable), the org, sign out.
import { useState } from "react";
import { NavLink, Outlet, useNavigate } from "react-router-dom";
import { ApiError, api, call, describe } from "../api/client";
import { ErrorLine } from "./ui";
import { useSession } from "../session";

const PAGES = [
  ["/", "Overview"],
  ["/batches", "Batches"],
  ["/quotes", "New batch"],
  ["/schedules", "Schedules"],
  ["/usage", "Usage"],
  ["/billing", "Billing"],
  ["/keys", "API keys"],
  ["/settings", "Settings"],
] as const;

export function Layout() {
  const { session, refresh } = useSession();
  const navigate = useNavigate();
  const [signOutError, setSignOutError] = useState<Error | null>(null);
  // A sign-out the service did not confirm is said, and the person is still signed in; a
  // session that had already ended (401) is signed out all the same.
  async function signOut() {
    setSignOutError(null);
    try {
      await call(api.DELETE("/v1/sessions/current"));
    } catch (caught) {
      if (!(caught instanceof ApiError && caught.status === 401)) {
        setSignOutError(new Error(`Sign out failed, you are still signed in: ${describe(caught)}`));
        return;
      }
    }
    await refresh();
    navigate("/sign-in");
  }
  return (
    <div className="frame">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header>
        <strong className="brand">BatchRoute</strong>
        <nav aria-label="Console">
          <ul>
            {PAGES.map(([to, label]) => (
              <li key={to}>
                <NavLink to={to} end={to === "/"}>
                  {label}
                </NavLink>
              </li>
            ))}
          </ul>
        </nav>
        <div className="who">
          <span>{session?.email}</span>
          <button type="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <ErrorLine error={signOutError} />
        <Outlet />
      </main>
    </div>
  );
}
